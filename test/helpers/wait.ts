// Waiting for something that happens in another process or connection,
// always with a deadline and a message that says what did not happen.
import type { ProcessOutput } from './worker.ts';

export async function waitFor<T>(
  what: string,
  check: () => Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Resolves with the first match of `pattern` in a child process's output. */
export async function waitForOutput(p: ProcessOutput, pattern: RegExp, timeoutMs = 60_000): Promise<RegExpMatchArray> {
  return waitFor(
    `${pattern} in the output`,
    async () => {
      const match = p.output().match(pattern);
      if (!match && p.child.exitCode !== null)
        throw new Error(`process exited (${p.child.exitCode}) before printing ${pattern}: ${p.output()}`);
      return match;
    },
    timeoutMs,
  ).catch((error: Error) => {
    throw new Error(`${error.message}\n${p.output()}`);
  });
}
