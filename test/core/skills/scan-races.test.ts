// The skills directory changing under a sync: a file swapped for a FIFO, a
// symbolic link or a grown file between the listing and the read, or a
// directory above it swapped for a link. Each is refused by name, and no
// read ever waits (a FIFO once held every libuv thread and the process).
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { scanHooks, scanSkillsDirectory, SKILL_LIMITS } from '../../../core/skills/scan.ts';

const root = mkdtempSync(path.join(tmpdir(), 'skills-races-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

/** A fresh directory with one skill `notes`: SKILL.md and data/table.csv. */
function skillsDir(): { dir: string; file: string } {
  const dir = mkdtempSync(path.join(root, 'dir-'));
  mkdirSync(path.join(dir, 'notes', 'data'), { recursive: true });
  writeFileSync(path.join(dir, 'notes', 'SKILL.md'), '---\nname: notes\ndescription: Notes\n---\nWrite notes.\n');
  writeFileSync(path.join(dir, 'notes', 'data', 'table.csv'), 'a,b\n1,2\n');
  return { dir, file: path.join(dir, 'notes', 'data', 'table.csv') };
}

/** Runs a scan whose read of `file` finds it changed by `change` (right after the listing). */
async function scanWithSwap(dir: string, file: string, change: () => void) {
  scanHooks.beforeRead = async (reading) => {
    if (reading === file) change();
  };
  try {
    return await scanSkillsDirectory(dir);
  } finally {
    scanHooks.beforeRead = undefined;
  }
}

t.test('a file swapped for a FIFO is refused, and the read does not wait for a writer', async (t) => {
  const { dir, file } = skillsDir();
  const { skills, refused } = await scanWithSwap(dir, file, () => {
    rmSync(file);
    execFileSync('mkfifo', [file]);
  });
  t.same(skills, []);
  t.same(refused, [{ name: 'notes', code: 'unsupported_file', reason: 'data/table.csv is not a regular file' }]);
});

t.test('a file swapped for a symbolic link is refused, not followed', async (t) => {
  const { dir, file } = skillsDir();
  const { refused } = await scanWithSwap(dir, file, () => {
    rmSync(file);
    symlinkSync('/etc/hostname', file);
  });
  t.match(refused, [{ name: 'notes', code: 'symlink' }]);
});

t.test('a directory above the file swapped for a link is refused', async (t) => {
  const { dir, file } = skillsDir();
  const elsewhere = mkdtempSync(path.join(root, 'elsewhere-'));
  writeFileSync(path.join(elsewhere, 'table.csv'), 'secret,elsewhere\n');
  const { refused } = await scanWithSwap(dir, file, () => {
    renameSync(path.dirname(file), `${path.dirname(file)}.old`);
    symlinkSync(elsewhere, path.dirname(file));
  });
  t.match(refused, [{ name: 'notes', code: 'symlink', reason: /reached through a symbolic link/ }]);
});

t.test('a file grown past the limit after the listing is refused', async (t) => {
  const { dir, file } = skillsDir();
  const { refused } = await scanWithSwap(dir, file, () =>
    appendFileSync(file, Buffer.alloc(SKILL_LIMITS.fileBytes + 1)),
  );
  t.match(refused, [{ name: 'notes', code: 'too_large' }]);
});

t.test('syncs beside a process swapping a file for a FIFO and back all finish', async (t) => {
  // No hook: the swap races the scan (as in production). Whatever each scan
  // sees, it ends, and the file system stays usable for everyone else.
  const { dir, file } = skillsDir();
  // The spares wait outside the skill (same file system: renames are atomic).
  const fifo = path.join(dir, 'spare.fifo');
  const regular = path.join(dir, 'spare.csv');
  execFileSync('mkfifo', [fifo]);
  writeFileSync(regular, 'a,b\n');
  let swapping = true;
  const swapper = (async () => {
    for (let i = 0; swapping; i++) {
      const from = i % 2 === 0 ? fifo : regular;
      renameSync(file, i % 2 === 0 ? regular : fifo);
      renameSync(from, file);
      await new Promise((r) => setImmediate(r));
    }
  })();
  const codes = new Set<string>();
  for (let i = 0; i < 120; i++) {
    const { skills, refused } = await scanSkillsDirectory(dir);
    for (const r of refused) codes.add(r.code);
    if (skills.length) codes.add('synced');
  }
  swapping = false;
  await swapper;
  t.ok(await stat(dir), 'the file system still answers');
  t.ok(
    [...codes].every((c) => ['synced', 'unsupported_file', 'changed'].includes(c)),
    `outcomes: ${[...codes].join(', ')}`,
  );
});
