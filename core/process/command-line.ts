// Arguments of the ops commands: `--help` prints the usage, and a bad
// argument prints what is wrong and the usage, exit code 2. The usage names
// the command as it was started: `npm run x` through npm, else the node
// command (`node dist/ops/accounts.js`: compiled, production has no tsx).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** A bad argument: reported with the command's usage, exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses the command line; prints the usage and exits on --help or a bad option. */
export function commandLine<O extends Options>(usage: string, options: O) {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${asStarted(usage).trim()}\n`);
    process.exit(0);
  }
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    return usageError(usage, (error as Error).message);
  }
}

/** Prints what is wrong and the usage, then exits 2. */
export function usageError(usage: string, message: string): never {
  process.stderr.write(`error: ${message}\n\n${asStarted(usage).trim()}\n`);
  process.exit(2);
}

/** The tree this file runs from: the checkout, dist/ or the tests' compiled copy. */
const root = path.resolve(import.meta.dirname, '../..');

/** The usage with each `npm run x --` (and `npm start`) written as the node
 *  command its script stands for, unless this process was started by npm. */
export function asStarted(usage: string): string {
  if (process.env.npm_lifecycle_event) return usage;
  const scripts = packageScripts();
  return usage.replace(/\bnpm (?:run ([\w:-]+)|start)(?: --(?= ))?/g, (whole, name: string | undefined) => {
    const entry = /^exec node --import tsx (\S+)\.ts(.*)$/.exec(scripts[name ?? 'start'] ?? '');
    return entry ? `${nodeCommand(entry[1]!)}${entry[2]}` : whole;
  });
}

/** `node dist/ops/accounts.js` (compiled) or `node --import tsx ops/accounts.ts`, from the current directory. */
function nodeCommand(file: string): string {
  const ts = import.meta.url.endsWith('.ts');
  const full = path.join(root, `${file}.${ts ? 'ts' : 'js'}`);
  const relative = path.relative(process.cwd(), full);
  return `node ${ts ? '--import tsx ' : ''}${relative.startsWith('..') ? full : relative}`;
}

function packageScripts(): Record<string, string> {
  try {
    return JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts ?? {};
  } catch {
    return {}; // without package.json the usage keeps its npm names
  }
}
