// SKILL.md parsing and the directory scan, without a database: the shipped
// example syncs cleanly; bad manifests and files are refused with a reason.
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parseManifest } from '../../../core/skills/manifest.ts';
import { scanSkillsDirectory } from '../../../core/skills/scan.ts';

const example = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../ops/skills-example');

t.test('the shipped example skill scans cleanly', async (t) => {
  const { skills, refused } = await scanSkillsDirectory(example);
  t.same(refused, []);
  t.equal(skills.length, 1);
  const [skill] = skills;
  t.match(skill!.manifest, {
    name: 'release-notes',
    version: '1.0.0',
    allowedTools: ['getAgentCompanyTask', 'listAgentCompanyRuns'],
  });
  t.same(
    skill!.manifest.env!.map((f) => [f.name, f.required, f.secret]),
    [
      ['PRODUCT_NAME', true, false],
      ['TRACKER_URL', false, false],
      ['TRACKER_TOKEN', false, true],
    ],
  );
  t.same(
    skill!.files.map((f) => f.path),
    ['SKILL.md', 'templates/notes.md'],
  );
  t.match(skill!.treeSha256, /^[0-9a-f]{64}$/);
});

t.test('manifest rules', async (t) => {
  t.match(parseManifest('---\nname: a-b\ndescription: D\nversion: 3\n---\nBody\n'), {
    name: 'a-b',
    version: '3',
    instructions: 'Body',
    env: null,
  });
  for (const [text, why] of [
    ['no front matter', /front matter/],
    ['---\nname: a\n---\n', /description/],
    ['---\nname: Bad_Name\ndescription: d\n---\n', /name/],
    ['---\nname: [unclosed\n---\n', /YAML/],
    ['---\nname: a\ndescription: d\nenv:\n  - name: lower\n---\n', /env/],
  ] as const)
    t.throws(() => parseManifest(text), why, text);
});

t.test('the scan refuses symlinks, name mismatches and missing manifests by name', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skills-scan-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, 'linked'));
  writeFileSync(path.join(dir, 'linked', 'SKILL.md'), '---\nname: linked\ndescription: d\n---\n');
  symlinkSync('/etc/hostname', path.join(dir, 'linked', 'host'));
  mkdirSync(path.join(dir, 'other'));
  writeFileSync(path.join(dir, 'other', 'SKILL.md'), '---\nname: different\ndescription: d\n---\n');
  mkdirSync(path.join(dir, 'empty'));
  mkdirSync(path.join(dir, 'Upper'));
  const { skills, refused } = await scanSkillsDirectory(dir);
  t.same(skills, []);
  t.same(refused.map((r) => [r.name, r.code]).sort(), [
    ['Upper', 'invalid_name'],
    ['empty', 'missing_manifest'],
    ['linked', 'symlink'],
    ['other', 'name_mismatch'],
  ]);
  t.same(await scanSkillsDirectory(path.join(dir, 'absent')), { skills: [], refused: [] }, 'no directory: no skills');
});
