// Where tests find things. `npm test` runs the test files from a compiled
// copy of the project (test/build.ts); TEST_SOURCE_ROOT names the checkout,
// where `npm start`, README, docs/ and test results belong.
import path from 'node:path';

/** The tree this file runs from: the compiled copy under `npm test`. */
export const runRoot = path.resolve(import.meta.dirname, '../..');
/** The checkout itself. */
export const sourceRoot = process.env.TEST_SOURCE_ROOT ?? runRoot;
/** True when running compiled JavaScript rather than TypeScript through tsx. */
export const compiled = import.meta.url.endsWith('.js');

/** The node arguments that run a process entry such as `workers/runner.ts`. */
export function entryArgs(entry: string): string[] {
  return compiled
    ? [path.join(runRoot, entry.replace(/\.ts$/, '.js'))]
    : ['--import', 'tsx', path.join(runRoot, entry)];
}
