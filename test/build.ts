// Compiles the project's TypeScript once per `npm test` into a scratch copy
// that test files then run from as plain JavaScript. Loading ~400 modules
// through tsx's loader hooks cost each test process about 1.4 s of CPU more
// than loading them compiled, and the suite runs ~100 processes on 2 cores.
// Each file is compiled on its own (every import stays an import, `.ts`
// specifiers become `.js`), so module layout and import.meta.url-relative
// paths match the checkout; what the code reads beside itself (migrations,
// the skills example, README and docs/, package.json) is linked in.
import { symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { compileTree, RUNTIME_DIRS } from '../ops/compile.ts';

const LINKED = ['node_modules', 'sql', 'docs', 'package.json', 'package-lock.json', 'README.md', 'redocly.yaml'];

/** Builds `root`'s sources and tests into `out` (which must not exist yet). */
export async function buildForTests(root: string, out: string): Promise<void> {
  await compileTree(root, out, [...RUNTIME_DIRS, 'test']);
  for (const name of LINKED) symlinkSync(path.join(root, name), path.join(out, name));
  // tap reads its settings from the directory it runs in; the build has its own.
  writeFileSync(path.join(out, '.taprc'), TAPRC);
}

const TAPRC = `# Written by test/build.ts for the compiled copy; see test/run.ts.
plugin:
  - "!@tapjs/typescript"
include:
  - "test/**/*.test.js"
disable-coverage: true
jobs: 4
timeout: 180
`;
