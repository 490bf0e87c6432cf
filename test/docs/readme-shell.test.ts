// README's copy-and-paste blocks (```sh runnable) run in order, in one bash,
// against a started service with a real worker: what a newcomer pastes works.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { testEnv } from '../helpers/config.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { startTestWorker } from '../helpers/worker.ts';

const root = sourceRoot;
const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
const blocks = [...readme.matchAll(/^```sh runnable\n([\s\S]*?)^```/gm)].map((m) => m[1]!);

t.test('README runnable shell blocks work against a started service', async (t) => {
  t.ok(blocks.length >= 3, `found ${blocks.length} runnable blocks`);
  const databaseUrl = await createTestDatabase(t);
  // Development, like `npm start` on a laptop: billing runs on its sandbox.
  // The channel walkthrough's reply receiver listens on 127.0.0.1, as README says to allow.
  const dev = { NODE_ENV: 'development', PROVIDER_ALLOW_PRIVATE_URLS: 'true' };
  const api = await startTestServerAtOwnUrl(t, databaseUrl, dev);
  await startTestWorker(t, databaseUrl, dev);
  const env = { ...testEnv(databaseUrl, { NODE_ENV: 'development', LOG_LEVEL: 'warn' }), BASE: api.url, PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root' };
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    // env -u NODE_OPTIONS: without tap's process-info hook in every node the blocks start (as a reader's shell would).
    execFile('/usr/bin/env', ['-u', 'NODE_OPTIONS', 'bash', '-euo', 'pipefail', '-c', blocks.join('\n')], { cwd: root, env, timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr }));
  });
  t.equal(code, 0, `the blocks ran to the end${code === 0 ? '' : `\n${stdout}\n${stderr}`}`);
  t.match(stdout, /created user ada@example\.com/);
  t.match(stdout, /Hello!/, 'the chat transcript has the message');
  t.match(stdout, /"plan": "pro"/, 'the plan changed through the sandbox');
  t.match(stdout, /0000/, 'the signed provider-key request stored the key (listed masked)');
  t.notMatch(stdout, /sk-test-0000000000000000"/, 'never listed in full');
  t.match(stdout, /reply: \{"id":"[^"]+","to":"me","text":"[^"]+"/, 'the webhook channel delivered the chat turn\'s answer to the receiver');
  t.match(stdout, /"outboundCount": 1/, 'one reply sent');
});
