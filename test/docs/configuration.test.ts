// docs/configuration.md holds exactly the settings tables made from the
// declarations (core/config/docs.ts), and the platform's code reads no
// environment variable that is not declared there: a setting read straight
// from process.env would escape validation, its default and the docs.
// `UPDATE_DOCS=1 npm test -- test/docs/configuration.test.ts` rewrites the
// page's tables after a declaration changed.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { settingsTables, TABLES_END, TABLES_START } from '../../core/config/docs.ts';
import { SETTINGS } from '../../core/config/settings.ts';
import { sourceRoot } from '../helpers/paths.ts';

/** Where the platform's processes run from; ops/ and test/ scripts keep their own tooling variables. */
const PLATFORM_DIRS = ['api', 'core', 'workers', 'schedules'];

/**
 * Variables the platform may read that are not its settings, each with why.
 * A variable that changes how the platform behaves belongs in the declarations.
 */
const NOT_SETTINGS: Record<string, string> = {
  npm_lifecycle_event: 'npm sets it for the script it runs: a command prints its usage as `npm run x` only then',
};

/**
 * The code of a file without the comments that open a line (their prose may
 * name process.env), line numbers kept. Only those: a string such as
 * '/api/v1/*' would otherwise look like the start of a comment.
 */
const withoutComments = (text: string) =>
  text.replace(/^\s*\/\*[\s\S]*?\*\//gm, (block) => block.replace(/[^\n]/g, ' ')).replace(/^\s*\/\/.*$/gm, '');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

t.test('docs/configuration.md carries the tables made from the declarations', async (t) => {
  const file = path.join(sourceRoot, 'docs/configuration.md');
  const page = readFileSync(file, 'utf8');
  const start = page.indexOf(TABLES_START);
  const end = page.indexOf(TABLES_END);
  t.ok(start >= 0 && end > start, 'the page has the settings markers');
  const written = page.slice(start, end + TABLES_END.length);
  const made = settingsTables();
  if (process.env.UPDATE_DOCS === '1' && written !== made) writeFileSync(file, page.replace(written, made));
  else t.equal(written, made, 'the tables are as the settings declare (UPDATE_DOCS=1 rewrites them)');
  for (const name of Object.keys(SETTINGS)) t.match(made, `| \`${name}\` |`, `${name} has its row`);
});

t.test('every process.env read in the platform names a declared setting', async (t) => {
  const declared = new Set(Object.keys(SETTINGS));
  const wrong: string[] = [];
  let reads = 0;
  for (const file of PLATFORM_DIRS.flatMap((dir) => sourceFiles(path.join(sourceRoot, dir)))) {
    const where = path.relative(sourceRoot, file);
    const text = withoutComments(readFileSync(file, 'utf8'));
    for (const m of text.matchAll(/process\.env(?:\.([A-Za-z_$][\w$]*)|\[\s*(['"`])([^'"`]*)\2\s*\])?(.?)/g)) {
      const name = m[1] ?? m[3];
      const line = text.slice(0, m.index).split('\n').length;
      // The whole environment handed on (loadConfig(process.env), a default parameter) is read through the declarations.
      if (name === undefined) {
        if (m[4] !== ')' && m[4] !== ',')
          wrong.push(`${where}:${line}: process.env used other than by name or as an argument`);
        continue;
      }
      reads++;
      if (!declared.has(name) && !(name in NOT_SETTINGS))
        wrong.push(`${where}:${line}: ${name} is not declared in core/config/groups/`);
    }
  }
  t.same(wrong, [], `${reads} reads by name, each of a declared setting`);
});

t.test('the allow-list holds only variables that are not settings', async (t) => {
  for (const name of Object.keys(NOT_SETTINGS))
    t.notOk(name in SETTINGS, `${name} is declared, so it needs no exception`);
});
