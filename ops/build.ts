// npm run build: the platform as JavaScript in dist/, what production runs
// (`node dist/api/server.js`, `node dist/workers/runner.js`, `node
// dist/ops/migrate.js`, every other command of ops/ likewise) without tsx or
// the TypeScript compiler. dist/ is laid out like the checkout, with the
// migrations beside the code that reads them; packages resolve from the
// project's node_modules one level up.
import { cpSync, rmSync } from 'node:fs';
import path from 'node:path';
import { compileTree, RUNTIME_DIRS } from './compile.ts';
import { commandLine } from '../core/process/command-line.ts';

const USAGE = `
usage: npm run build
Compiles api/, core/, ops/, workers/ and schedules/ into dist/ (replacing it),
one JavaScript file per TypeScript file with a source map beside it, and
copies sql/ (the migrations). Run the result with node, e.g.
node dist/api/server.js.
`;
commandLine(USAGE, {});

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'dist');
const started = performance.now();
rmSync(out, { recursive: true, force: true });
const { files } = await compileTree(root, out, RUNTIME_DIRS, { sourceMaps: true });
cpSync(path.join(root, 'sql'), path.join(out, 'sql'), { recursive: true });
// Its `"type": "module"`: dist/ says by itself that its files are ES modules.
cpSync(path.join(root, 'package.json'), path.join(out, 'package.json'));
process.stdout.write(
  `build: ${files} files compiled into dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
);
