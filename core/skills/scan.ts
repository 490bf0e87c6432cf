// Reads the skills directory: one skill per subdirectory holding SKILL.md
// and its files. Every file's SHA-256 and size is recorded; the tree hash
// covers the sorted (path, sha256, size) list, so any changed byte, added or
// removed file changes it. A skill that breaks a rule is reported by name
// with the reason and does not stop the others.
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ManifestError, parseManifest, SKILL_NAME, type Manifest } from './manifest.ts';

export const SKILL_LIMITS = {
  files: 100,
  fileBytes: 1_048_576,
  totalBytes: 5_242_880,
  manifestBytes: 65_536,
  depth: 4,
  skills: 200,
} as const;

export type SkillFile = { path: string; sha256: string; bytes: number };
export type ScannedSkill = { dir: string; manifest: Manifest; manifestSha256: string; files: SkillFile[]; treeSha256: string; totalBytes: number };
export type RefusedSkill = { name: string; code: string; reason: string };

class SkillRefusal extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

async function walk(root: string, rel: string, depth: number, out: { path: string; bytes: number }[]): Promise<void> {
  if (depth > SKILL_LIMITS.depth) throw new SkillRefusal('too_deep', `directories nest deeper than ${SKILL_LIMITS.depth} levels`);
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const relPath = rel ? `${rel}/${entry.name}` : entry.name;
    const info = await lstat(path.join(root, relPath));
    if (info.isSymbolicLink()) throw new SkillRefusal('symlink', `${relPath} is a symbolic link; a skill holds its own files only`);
    if (info.isDirectory()) await walk(root, relPath, depth + 1, out);
    else if (info.isFile()) {
      if (info.size > SKILL_LIMITS.fileBytes) throw new SkillRefusal('too_large', `${relPath} is larger than ${SKILL_LIMITS.fileBytes} bytes`);
      out.push({ path: relPath, bytes: info.size });
      if (out.length > SKILL_LIMITS.files) throw new SkillRefusal('too_many_files', `more than ${SKILL_LIMITS.files} files`);
    } else throw new SkillRefusal('unsupported_file', `${relPath} is not a regular file`);
  }
}

async function scanOne(root: string, dir: string): Promise<ScannedSkill> {
  const base = path.join(root, dir);
  const listed: { path: string; bytes: number }[] = [];
  await walk(base, '', 0, listed);
  const totalBytes = listed.reduce((n, f) => n + f.bytes, 0);
  if (totalBytes > SKILL_LIMITS.totalBytes) throw new SkillRefusal('too_large', `the files hold more than ${SKILL_LIMITS.totalBytes} bytes`);
  if (!listed.some((f) => f.path === 'SKILL.md')) throw new SkillRefusal('missing_manifest', 'no SKILL.md at the top of the directory');
  const files: SkillFile[] = [];
  let manifestText = '';
  let manifestSha256 = '';
  for (const f of listed) {
    const bytes = await readFile(path.join(base, f.path));
    const digest = sha256(bytes);
    files.push({ path: f.path, sha256: digest, bytes: bytes.length });
    if (f.path === 'SKILL.md') {
      if (bytes.length > SKILL_LIMITS.manifestBytes) throw new SkillRefusal('too_large', `SKILL.md is larger than ${SKILL_LIMITS.manifestBytes} bytes`);
      manifestText = bytes.toString('utf8');
      manifestSha256 = digest;
    }
  }
  let manifest: Manifest;
  try {
    manifest = parseManifest(manifestText);
  } catch (error) {
    if (error instanceof ManifestError) throw new SkillRefusal('invalid_manifest', error.message);
    throw error;
  }
  if (manifest.name !== dir) throw new SkillRefusal('name_mismatch', `SKILL.md names "${manifest.name}" but the directory is "${dir}"`);
  const treeSha256 = sha256(files.map((f) => `${f.path}\0${f.sha256}\0${f.bytes}\n`).join(''));
  return { dir, manifest, manifestSha256, files, treeSha256, totalBytes: files.reduce((n, f) => n + f.bytes, 0) };
}

export class SkillsDirectoryError extends Error {
  override name = 'SkillsDirectoryError';
}

export async function scanSkillsDirectory(root: string): Promise<{ skills: ScannedSkill[]; refused: RefusedSkill[] }> {
  let entries;
  try {
    entries = await readdir(root, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { skills: [], refused: [] };
    throw new SkillsDirectoryError(`the skills directory cannot be read (${code ?? 'error'})`);
  }
  const dirs = entries.filter((e) => !e.name.startsWith('.')).sort((a, b) => (a.name < b.name ? -1 : 1));
  const skills: ScannedSkill[] = [];
  const refused: RefusedSkill[] = [];
  for (const entry of dirs.slice(0, SKILL_LIMITS.skills)) {
    if (!entry.isDirectory()) continue; // loose files (a README) are not skills
    if (!SKILL_NAME.test(entry.name) || entry.name.length > 64) {
      refused.push({ name: entry.name.slice(0, 64), code: 'invalid_name', reason: 'a skill directory is named with lowercase letters, digits and single hyphens (at most 64)' });
      continue;
    }
    try {
      skills.push(await scanOne(root, entry.name));
    } catch (error) {
      if (error instanceof SkillRefusal) refused.push({ name: entry.name, code: error.code, reason: error.message });
      else refused.push({ name: entry.name, code: 'unreadable', reason: `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})` });
    }
  }
  return { skills, refused };
}
