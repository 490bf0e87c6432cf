// The manual's copy-and-paste blocks (```sh runnable) run in order, in one
// bash, against a started service with a real worker: what a newcomer pastes
// works. README.md comes first (its first steps set BASE, TOKEN and TENANT,
// which the docs pages' blocks continue from), then the docs/*.md pages in
// the order docs/README.md lists them (the manual's reading order), then any
// page it does not list, by name.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { TEST_SECRET, testEnv } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember } from '../helpers/fixtures.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { startTestWorker } from '../helpers/worker.ts';

const root = sourceRoot;
const docsDir = path.join(root, 'docs');
const docsPages = readdirSync(docsDir)
  .filter((name) => name.endsWith('.md'))
  .sort();
const listed = [
  ...readFileSync(path.join(docsDir, 'README.md'), 'utf8').matchAll(/\]\(([a-z0-9-]+\.md)(?:#[^)]*)?\)/g),
].map((m) => m[1]!);
const ordered = [...new Set([...listed.filter((name) => docsPages.includes(name)), ...docsPages])];
const pages = ['README.md', ...ordered.map((name) => path.join('docs', name))];
const runnable = (file: string) =>
  [...readFileSync(path.join(root, file), 'utf8').matchAll(/^```sh runnable\n([\s\S]*?)^```/gm)].map((m) => m[1]!);
const blocksByPage = pages.map((file) => ({ file, blocks: runnable(file) }));
const blocks = blocksByPage.flatMap((page) => page.blocks);

/** A `jq` that behaves as Debian 12's jq 1.6 on empty input (prints nothing
 *  and exits 0, even with -e), whatever jq the machine has: a block must not
 *  take that for an answer. */
function jq16(): string {
  const jq = execFileSync('sh', ['-c', 'command -v jq'], { encoding: 'utf8' }).trim();
  return `#!/bin/bash\ninput=$(cat)\n[ -n "\${input//[[:space:]]/}" ] || exit 0\nprintf '%s\\n' "$input" | exec ${jq} "$@"\n`;
}

const STATUS = '@@block-status';
const FAILED = '@@command-failed';

/**
 * Runs blocks as a person pastes them, one after the other, into a terminal:
 * one interactive bash (history expansion on; no -e, no pipefail; --norc
 * and --noprofile keep the machine's own settings out; --noediting, as
 * bracketed paste inserts text as it is). It reads the blocks from a file,
 * so stdin stays free, like a terminal with nothing typed. After each block
 * a line prints the block's exit status; an ERR trap reports any command
 * that failed where -e would have stopped; bash's own complaints (`event
 * not found`, syntax errors, unknown commands) are collected. In its own
 * process group: whatever a block left running is stopped at the end.
 */
async function runPasted(t: Test, blocks: string[], env: Record<string, string>, timeout: number) {
  const dir = t.testdir({
    bin: { jq: jq16() },
    'pasted.sh': [
      `trap 'printf "${FAILED} %s: %s\\n" "$?" "\${BASH_COMMAND:0:100}" >&2' ERR`,
      ...blocks.flatMap((block, i) => [block, `printf '\\n${STATUS} ${i} %s\\n' "$?"`]),
    ].join('\n'),
  });
  chmodSync(path.join(dir, 'bin', 'jq'), 0o755);
  const shellEnv = {
    ...env,
    PATH: `${path.join(dir, 'bin')}:${env.PATH}`,
    PS1: '',
    PS2: '',
    HISTFILE: path.join(dir, 'history'),
  };
  const args = [
    '-u',
    'NODE_OPTIONS',
    'bash',
    '--norc',
    '--noprofile',
    '--noediting',
    '-i',
    path.join(dir, 'pasted.sh'),
  ];
  // env -u NODE_OPTIONS: without tap's process-info hook in every node the blocks start (as a reader's shell would).
  const child = spawn('/usr/bin/env', args, { cwd: root, env: shellEnv, detached: true, stdio: 'pipe' });
  child.stdin.end();
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
  // On bash's exit the group is stopped (a receiver left running would hold
  // the pipes open), then the output is read to its end.
  const closed = new Promise((resolve) => child.on('close', resolve));
  await new Promise((resolve) => child.on('exit', resolve));
  clearTimeout(timer);
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // the group has ended already
  }
  await closed;
  const statuses = [...stdout.matchAll(new RegExp(`${STATUS} (\\d+) (\\d+)\\n`, 'g'))].map((m) => Number(m[2]));
  const failed = stderr.split('\n').filter((line) => line.startsWith(FAILED));
  // Without a terminal bash says it has no job control; anything else it says is a complaint.
  const complaints = stderr
    .split('\n')
    .filter((line) => line.startsWith('bash: ') && !/terminal process group|no job control/.test(line));
  return { statuses, failed, complaints, stdout, stderr, output: `${stdout}\n${stderr}` };
}

t.test('README and docs runnable shell blocks work against a started service', async (t) => {
  const found = blocksByPage
    .filter((page) => page.blocks.length > 0)
    .map((page) => `${page.file}: ${page.blocks.length}`)
    .join(', ');
  t.ok(blocks.length >= 4, `found ${blocks.length} runnable blocks (${found})`);
  t.ok(runnable('README.md').length >= 2, "README's first steps are runnable and run first");
  const databaseUrl = await createTestDatabase(t);
  // Development, like `npm start` on a laptop: billing runs on its sandbox.
  // The channel walkthrough's reply receiver listens on 127.0.0.1, as docs/channels.md says to allow.
  const dev = { NODE_ENV: 'development', PROVIDER_ALLOW_PRIVATE_URLS: 'true' };
  const api = await startTestServerAtOwnUrl(t, databaseUrl, dev);
  await startTestWorker(t, databaseUrl, dev);
  const env = {
    ...testEnv(databaseUrl, { NODE_ENV: 'development', LOG_LEVEL: 'warn' }),
    BASE: api.url,
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
  };
  const run = await runPasted(t, [...blocks, `echo "README's session: $SESSION"`], env, 120_000);
  const { stdout } = run;
  const ok = run.statuses.length === blocks.length + 1 && run.statuses.every((s) => s === 0);
  t.ok(ok, `every block ended with status 0: ${run.statuses.join(', ')}${ok ? '' : `\n${run.output}`}`);
  t.same(run.failed, [], 'no command failed on the way');
  t.same(run.complaints, [], 'bash had nothing to complain about');
  t.notMatch(run.stderr, /stopped here|^stopped:/m, 'no call failed');
  t.match(stdout, /created user ada@example\.com/);
  t.match(stdout, /Hello there\n/, 'the chat transcript has the message');
  t.match(stdout, /"plan": "pro"/, 'the plan changed through the sandbox');
  t.match(stdout, /0000/, 'the signed provider-key request stored the key (listed masked)');
  t.notMatch(stdout, /sk-test-0000000000000000"/, 'never listed in full');
  t.match(
    stdout,
    /reply: \{"id":"[^"]+","to":"me","text":"[^"]+"/,
    "the webhook channel delivered the chat turn's answer to the receiver",
  );
  t.match(stdout, /"outboundCount": 1/, 'one reply sent');
  t.match(stdout, /grace@example\.com member\n/, 'Grace joined as a member');
  t.match(stdout, /Grace's next request there: 404\n/, 'and is refused there once removed');
  t.match(
    stdout,
    /member_removed by ada@example\.com: grace@example\.com member -> -/,
    'the audit says who removed whom',
  );
  t.match(stdout, /README's session: [0-9a-f-]{36}\n/, "the docs' blocks leave README's SESSION as it was");
});

t.test(
  'the webhook walkthrough shows the refusal when private addresses are not allowed (nothing piped away)',
  async (t) => {
    const block = blocks.find((b) => b.includes('/api/channels/webhook/config'));
    t.ok(block, 'the webhook block is runnable');
    const databaseUrl = await createTestDatabase(t);
    // Started without PROVIDER_ALLOW_PRIVATE_URLS: the callback on 127.0.0.1 is refused.
    const api = await startTestServerAtOwnUrl(t, databaseUrl, { NODE_ENV: 'development' });
    const member = await createMember(api.db);
    const token = await signPlatformToken({ userId: member.userId }, Buffer.from(TEST_SECRET, 'base64'), api.url);
    const env = {
      BASE: api.url,
      TOKEN: token,
      TENANT: member.tenantId,
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
    };
    const run = await runPasted(t, [block!], env, 60_000);
    t.match(run.output, /127\.0\.0\.1 is a loopback address/, 'the reader sees why');
    t.not(run.statuses[0], 0, 'the block fails');
    t.notMatch(
      run.output,
      /Could not resolve host|\/jobs\/null|"result": null/,
      'and stops there: no step after the refusal runs',
    );
  },
);

t.test("README's first steps stop at the first failed call, saying so, with nothing after it", async (t) => {
  const [first] = runnable('README.md');
  const databaseUrl = await createTestDatabase(t);
  // The user is made (the database is there), but nothing listens at BASE.
  const env = {
    ...testEnv(databaseUrl, { NODE_ENV: 'development', LOG_LEVEL: 'warn' }),
    BASE: 'http://127.0.0.1:9',
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
  };
  const run = await runPasted(t, [first!], env, 60_000);
  t.match(
    run.stderr,
    /Failed to connect[\s\S]*<- stopped here: the call above failed/,
    'the failure and where it stopped',
  );
  t.same(run.statuses, [1], 'the block ends failed');
  t.notMatch(run.output, /null|jq: error|api\/chat\/jobs\//, 'no step after the failure ran');
});
