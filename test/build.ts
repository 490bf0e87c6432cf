// Compiles the project's TypeScript once per `npm test` into a scratch copy
// that test files then run from as plain JavaScript. Loading ~400 modules
// through tsx's loader hooks cost each test process about 1.4 s of CPU more
// than loading them compiled, and the suite runs ~100 processes on 2 cores.
// Each file is compiled on its own (every import stays an import, `.ts`
// specifiers become `.js`), so module layout and import.meta.url-relative
// paths match the checkout; what the code reads beside itself (migrations,
// the skills example, README and docs/, package.json) is linked in.
import { cpSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';

const SOURCE_DIRS = ['api', 'core', 'ops', 'workers', 'schedules', 'test'];
const LINKED = ['node_modules', 'sql', 'package.json', 'package-lock.json', 'README.md', 'docs', 'redocly.yaml'];

function sourcesIn(directory: string, found: { ts: string[]; other: string[] }) {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const file = path.join(directory, entry.name);
    if (entry.isDirectory()) sourcesIn(file, found);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.ts.push(file);
    else found.other.push(file);
  }
  return found;
}

// Leaves every import in place; a relative `./x.ts` becomes `./x.js`.
const keepImports: Plugin = {
  name: 'keep-imports',
  setup(builder) {
    builder.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      const relative = args.path.startsWith('./') || args.path.startsWith('../');
      return { path: relative ? args.path.replace(/\.ts$/, '.js') : args.path, external: true };
    });
  },
};

/** Builds `root`'s sources into `out` (which must not exist yet). */
export async function buildForTests(root: string, out: string): Promise<void> {
  const found = { ts: [] as string[], other: [] as string[] };
  for (const dir of SOURCE_DIRS) sourcesIn(path.join(root, dir), found);
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: found.ts,
    outdir: out,
    outbase: root,
    bundle: true,
    plugins: [keepImports],
    format: 'esm',
    platform: 'node',
    target: 'node20',
    logLevel: 'error',
  });
  for (const file of found.other) cpSync(file, path.join(out, path.relative(root, file)));
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
