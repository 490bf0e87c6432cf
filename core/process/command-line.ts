// Arguments of the ops commands: `--help` prints the usage, and a bad
// argument prints what is wrong and the usage, exit code 2.
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
    process.stdout.write(`${usage.trim()}\n`);
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
  process.stderr.write(`error: ${message}\n\n${usage.trim()}\n`);
  process.exit(2);
}
