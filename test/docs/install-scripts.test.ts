// `npm ci` runs a dependency's install script only if package.json's
// allowScripts says so, and warns about every one it does not cover: each
// package with an install script is decided there (true runs it, false says
// it is not needed), so an install on this machine neither warns nor runs
// anything nobody chose.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { sourceRoot } from '../helpers/paths.ts';

type Entry = { version?: string; hasInstallScript?: boolean; os?: string[]; cpu?: string[] };
const read = (file: string) => JSON.parse(readFileSync(path.join(sourceRoot, file), 'utf8'));
const allowScripts = (read('package.json') as { allowScripts: Record<string, boolean> }).allowScripts;
const lock = read('package-lock.json') as { packages: Record<string, Entry> };

/** Whether npm installs the package here (platform packages name their os and cpu). */
const installedHere = (entry: Entry) =>
  (!entry.os || entry.os.includes(process.platform)) && (!entry.cpu || entry.cpu.includes(process.arch));

t.test('every install script npm would meet here is decided in allowScripts', async (t) => {
  const withScripts = Object.entries(lock.packages)
    .filter(([key, entry]) => key && entry.hasInstallScript && installedHere(entry))
    .map(([key]) => key.replace(/^.*node_modules\//, ''));
  t.ok(withScripts.includes('msgpackr-extract'), `found: ${withScripts.join(', ')}`);
  const undecided = withScripts.filter((name) => typeof allowScripts[name] !== 'boolean');
  t.same(undecided, [], 'packages npm ci would warn about');
});
