// Reads the skills directory: one skill per subdirectory holding SKILL.md
// and its files. Every file's SHA-256 and size is recorded; the tree hash
// covers the sorted (path, sha256, size) list, so any changed byte, added or
// removed file changes it. A skill that breaks a rule is reported by name
// with the reason and does not stop the others.
//
// The directory may change while we read it (someone swaps a file for a
// FIFO or a symbolic link between the listing and the read). So a file is
// opened without following a link and without blocking, the opened handle
// is checked (a regular file, where the listing said, within the size
// limits) and read from: a sync never waits on a pipe or a device.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, realpath } from 'node:fs/promises';
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
export type ScannedSkill = {
  dir: string;
  manifest: Manifest;
  manifestSha256: string;
  files: SkillFile[];
  treeSha256: string;
  totalBytes: number;
};
export type RefusedSkill = { name: string; code: string; reason: string };

class SkillRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

async function walk(root: string, rel: string, depth: number, out: { path: string; bytes: number }[]): Promise<void> {
  if (depth > SKILL_LIMITS.depth)
    throw new SkillRefusal('too_deep', `directories nest deeper than ${SKILL_LIMITS.depth} levels`);
  const entries = await readdir(path.join(root, rel), { withFileTypes: true });
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const relPath = rel ? `${rel}/${entry.name}` : entry.name;
    const info = await lstat(path.join(root, relPath)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT')
        throw new SkillRefusal('changed', `${relPath} went away while the skill was read; sync again`);
      throw error;
    });
    if (info.isSymbolicLink())
      throw new SkillRefusal('symlink', `${relPath} is a symbolic link; a skill holds its own files only`);
    if (info.isDirectory()) await walk(root, relPath, depth + 1, out);
    else if (info.isFile()) {
      if (info.size > SKILL_LIMITS.fileBytes)
        throw new SkillRefusal('too_large', `${relPath} is larger than ${SKILL_LIMITS.fileBytes} bytes`);
      out.push({ path: relPath, bytes: info.size });
      if (out.length > SKILL_LIMITS.files)
        throw new SkillRefusal('too_many_files', `more than ${SKILL_LIMITS.files} files`);
    } else throw new SkillRefusal('unsupported_file', `${relPath} is not a regular file`);
  }
}

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** Test seam: runs just before a listed file is opened (to change the directory in between). */
export const scanHooks: { beforeRead?: (file: string) => Promise<void> } = {};

/**
 * The bytes of a listed file, read from one handle: opened without following
 * a link or blocking, then checked to be a regular file at the listed place
 * (no directory above it swapped for a link) and within the size limit.
 */
export async function readSkillFile(base: string, relPath: string): Promise<Buffer> {
  const file = path.join(base, relPath);
  await scanHooks.beforeRead?.(file);
  let handle;
  try {
    handle = await open(file, OPEN_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP')
      throw new SkillRefusal('symlink', `${relPath} is a symbolic link; a skill holds its own files only`);
    if (code === 'ENOENT')
      throw new SkillRefusal('changed', `${relPath} went away while the skill was read; sync again`);
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new SkillRefusal('unsupported_file', `${relPath} is not a regular file`);
    if (info.size > SKILL_LIMITS.fileBytes)
      throw new SkillRefusal('too_large', `${relPath} is larger than ${SKILL_LIMITS.fileBytes} bytes`);
    // Where the opened file really is (Linux names it under /proc). Not the
    // listed place: a directory above it is a link now, or it was moved.
    const opened = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => null);
    const expected = path.join(await realpath(base), relPath);
    if (opened !== null && opened !== expected) {
      const dirNow = await realpath(path.dirname(file)).catch(() => null);
      if (dirNow === path.dirname(expected))
        throw new SkillRefusal('changed', `${relPath} changed while the skill was read; sync again`);
      throw new SkillRefusal(
        'symlink',
        `${relPath} is reached through a symbolic link; a skill holds its own files only`,
      );
    }
    // One byte more than the limit tells a file that grew since its stat.
    const buffer = Buffer.alloc(Math.min(info.size, SKILL_LIMITS.fileBytes) + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) break;
    }
    if (length > info.size)
      throw new SkillRefusal('changed', `${relPath} changed while the skill was read; sync again`);
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

async function scanOne(root: string, dir: string): Promise<ScannedSkill> {
  const base = path.join(root, dir);
  const listed: { path: string; bytes: number }[] = [];
  await walk(base, '', 0, listed);
  const totalBytes = listed.reduce((n, f) => n + f.bytes, 0);
  if (totalBytes > SKILL_LIMITS.totalBytes)
    throw new SkillRefusal('too_large', `the files hold more than ${SKILL_LIMITS.totalBytes} bytes`);
  if (!listed.some((f) => f.path === 'SKILL.md'))
    throw new SkillRefusal('missing_manifest', 'no SKILL.md at the top of the directory');
  const files: SkillFile[] = [];
  let manifestText = '';
  let manifestSha256 = '';
  for (const f of listed) {
    const bytes = await readSkillFile(base, f.path);
    const digest = sha256(bytes);
    files.push({ path: f.path, sha256: digest, bytes: bytes.length });
    if (f.path === 'SKILL.md') {
      if (bytes.length > SKILL_LIMITS.manifestBytes)
        throw new SkillRefusal('too_large', `SKILL.md is larger than ${SKILL_LIMITS.manifestBytes} bytes`);
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
  if (manifest.name !== dir)
    throw new SkillRefusal('name_mismatch', `SKILL.md names "${manifest.name}" but the directory is "${dir}"`);
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
      refused.push({
        name: entry.name.slice(0, 64),
        code: 'invalid_name',
        reason: 'a skill directory is named with lowercase letters, digits and single hyphens (at most 64)',
      });
      continue;
    }
    try {
      skills.push(await scanOne(root, entry.name));
    } catch (error) {
      if (error instanceof SkillRefusal) refused.push({ name: entry.name, code: error.code, reason: error.message });
      else
        refused.push({
          name: entry.name,
          code: 'unreadable',
          reason: `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
        });
    }
  }
  return { skills, refused };
}
