// The layers import downward only: core/ is the library everything stands
// on; schedules/ is data; api/ and workers/ are the two processes' libraries
// (they never import each other); ops/ holds the commands a person runs and
// may import anything but the tests. The runtime layers import no development
// dependency, so the production image (pruned of them) loads all it needs.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { sourceRoot } from './helpers/paths.ts';

const LAYERS = ['core', 'schedules', 'api', 'workers', 'ops'] as const;
type Layer = (typeof LAYERS)[number];

/** What each layer may import from the project besides itself. */
const MAY_IMPORT: Record<Layer, Layer[]> = {
  core: [],
  schedules: ['core'],
  api: ['core', 'schedules'],
  workers: ['core', 'schedules'],
  ops: ['core', 'schedules', 'api', 'workers'],
};
const RUNTIME: Layer[] = ['core', 'schedules', 'api', 'workers'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** Every module a file names: static imports, re-exports and import(). */
function importsOf(file: string): string[] {
  return ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
}

/** The package a bare specifier names ("@scope/name/x" -> "@scope/name"). */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

const manifest = JSON.parse(readFileSync(path.join(sourceRoot, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
};
const devOnly = new Set(Object.keys(manifest.devDependencies));

t.test('every import points down a layer (or stays in its own)', async (t) => {
  const crossings: string[] = [];
  let checked = 0;
  for (const layer of LAYERS) {
    for (const file of sourceFiles(path.join(sourceRoot, layer))) {
      for (const specifier of importsOf(file)) {
        checked++;
        const where = `${path.relative(sourceRoot, file)} imports ${specifier}`;
        if (specifier.startsWith('.')) {
          const target = path.relative(sourceRoot, path.resolve(path.dirname(file), specifier)).split(path.sep)[0]!;
          if (target === layer) continue;
          if (!(MAY_IMPORT[layer] as string[]).includes(target))
            crossings.push(`${where} (${layer}/ may import ${MAY_IMPORT[layer].join(', ') || 'nothing else'})`);
        } else if (RUNTIME.includes(layer) && !specifier.startsWith('node:') && devOnly.has(packageOf(specifier))) {
          crossings.push(`${where} (a development dependency: the production image has none)`);
        }
      }
    }
  }
  t.ok(checked > 1000, `${checked} imports read`);
  t.same(crossings, [], 'no import crosses a layer the wrong way');
});

/** The commands the production image runs (README's "Running in production"). */
const PRODUCTION_ENTRIES = [
  'api/server.ts',
  'workers/runner.ts',
  'ops/migrate.ts',
  'ops/accounts.ts',
  'ops/licenses.ts',
  'ops/tenant-plan.ts',
  'ops/tenant-suspend.ts',
  'ops/rotate-keys.ts',
  'ops/login-unlock.ts',
  'ops/runner.ts',
];

t.test('what the production commands load needs no development dependency', async (t) => {
  const seen = new Set<string>();
  const needs: string[] = [];
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of importsOf(file)) {
      if (specifier.startsWith('.')) visit(path.resolve(path.dirname(file), specifier));
      else if (!specifier.startsWith('node:') && devOnly.has(packageOf(specifier)))
        needs.push(`${path.relative(sourceRoot, file)} imports ${specifier}`);
    }
  };
  for (const entry of PRODUCTION_ENTRIES) visit(path.join(sourceRoot, entry));
  t.ok(seen.size > 300, `${seen.size} files reached`);
  t.same(needs, [], 'no development dependency on the way');
});

t.test('the rule itself catches a crossing', async (t) => {
  // A file of core/ that imports api/ would resolve to the api layer.
  const file = path.join(sourceRoot, 'core', 'db', 'pool.ts');
  const target = path.relative(sourceRoot, path.resolve(path.dirname(file), '../../api/app.ts')).split(path.sep)[0];
  t.equal(target, 'api');
  t.notOk((MAY_IMPORT.core as string[]).includes(target!));
  t.same(
    ts
      .preProcessFile(
        "import a from './a.ts'; export { b } from '../b.ts'; const c = await import('../../c.ts');",
        true,
        true,
      )
      .importedFiles.map((f) => f.fileName),
    ['./a.ts', '../b.ts', '../../c.ts'],
  );
});
