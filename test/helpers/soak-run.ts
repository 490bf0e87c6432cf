// Runs `npm run soak -- <args>` from the checkout, as a person would (not the
// tests' compiled copy), and answers its exit code and everything it printed.
import { spawn } from 'node:child_process';
import type { Test } from 'tap';
import { sourceRoot } from './paths.ts';

export async function runSoak(
  t: Test,
  args: string[],
  overrides: Record<string, string> = {},
): Promise<{ code: number | null; output: string }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    LOG_LEVEL: 'warn',
    ...overrides,
  };
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', 'npm', 'run', '--silent', 'soak', '--', ...args], {
    cwd: sourceRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  t.teardown(() => void (child.exitCode === null && child.kill('SIGINT')));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) t.comment(output);
  return { code, output };
}
