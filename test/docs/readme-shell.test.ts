// The manual's copy-and-paste blocks (```sh runnable) run in order, in one
// bash, against a started service with a real worker: what a newcomer pastes
// works. README.md comes first (its first steps set BASE, TOKEN and TENANT,
// which the docs pages' blocks continue from), then the docs/*.md pages in
// the order docs/README.md lists them (the manual's reading order), then any
// page it does not list, by name.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
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

/** Runs a script in bash -euo pipefail, in its own process group: whatever it
 *  left running (a block's reply receiver after a failed step) is stopped. */
async function runBash(script: string, env: Record<string, string>, timeout: number) {
  // env -u NODE_OPTIONS: without tap's process-info hook in every node the blocks start (as a reader's shell would).
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', 'bash', '-euo', 'pipefail', '-c', script], {
    cwd: root,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
  // On bash's exit the group is stopped (a receiver left running would hold
  // the pipes open), then the output is read to its end.
  const closed = new Promise((resolve) => child.on('close', resolve));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // the group has ended already
  }
  await closed;
  const result = { code, stdout, stderr };
  return result;
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
  const { code, stdout, stderr } = await runBash(
    `${blocks.join('\n')}\necho "README's session: $SESSION"`,
    env,
    120_000,
  );
  t.equal(code, 0, `the blocks ran to the end${code === 0 ? '' : `\n${stdout}\n${stderr}`}`);
  t.match(stdout, /created user ada@example\.com/);
  t.match(stdout, /Hello!/, 'the chat transcript has the message');
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
    const { code, stdout, stderr } = await runBash(`${block!}\necho "after the block"`, env, 60_000);
    t.match(stdout + stderr, /127\.0\.0\.1 is a loopback address/, 'the reader sees why');
    t.not(code, 0, 'the block fails');
    t.notMatch(
      stdout + stderr,
      /Could not resolve host|\/jobs\/null|"result": null|after the block/,
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
  const { code, stdout, stderr } = await runBash(`set +e\n${first!}\necho "exit: $?"`, env, 60_000);
  t.equal(code, 0);
  t.match(stderr, /Failed to connect[\s\S]*<- stopped here: the call above failed/, 'the failure and where it stopped');
  t.match(stdout, /exit: 1\n$/, 'the block ends failed');
  t.notMatch(stdout + stderr, /null|jq: error|api\/chat\/jobs\//, 'no step after the failure ran');
});
