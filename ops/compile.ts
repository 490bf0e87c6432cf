// Compiles the project's TypeScript to JavaScript, one file for each source
// file (every import stays an import; `./x.ts` becomes `./x.js`), into a tree
// laid out like the checkout, so import.meta.url-relative paths (the
// migrations) resolve the same way. Used by `npm run build` (dist/, what
// production runs) and by `npm test` (a scratch copy the tests run from).
import { cpSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { build, type Plugin } from 'esbuild';

/** The directories production runs from; the tests add `test`. */
export const RUNTIME_DIRS = ['api', 'core', 'ops', 'workers', 'schedules'];

/** The Node version the output is written for (package.json's engines). */
export const TARGET = 'node24';

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

/** Compiles `dirs` of `root` into `out` (created if missing); other files in them are copied as they are. */
export async function compileTree(
  root: string,
  out: string,
  dirs: readonly string[],
  options: { sourceMaps?: boolean } = {},
): Promise<{ files: number }> {
  const found = { ts: [] as string[], other: [] as string[] };
  for (const dir of dirs) sourcesIn(path.join(root, dir), found);
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: found.ts,
    outdir: out,
    outbase: root,
    bundle: true,
    plugins: [keepImports],
    format: 'esm',
    platform: 'node',
    target: TARGET,
    // Beside each file (node --enable-source-maps then names the TypeScript lines).
    ...(options.sourceMaps ? { sourcemap: 'linked' as const, sourcesContent: false } : {}),
    logLevel: 'error',
  });
  for (const file of found.other) cpSync(file, path.join(out, path.relative(root, file)));
  return { files: found.ts.length };
}
