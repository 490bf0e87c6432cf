// The published contracts: llms.txt links resolve, the knowledge manifest's
// hashes are of the bytes actually served, and the Arazzo quickstart both
// lints clean and runs green with redocly respect against a live server.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';

const databaseUrl = await createTestDatabase(t);
const { url: base, logs } = await startTestServerAtOwnUrl(t, databaseUrl);
const MANIFEST = `${base}/agent-public-contracts/v1/knowledge-manifest.json`;

const redocly = path.resolve('node_modules/.bin/redocly');
// Scratch space for the downloaded Arazzo file and respect's report, inside
// the test run's own scratch directory and removed when the file ends.
const scratch = mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR ?? tmpdir(), 'contracts-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      '/usr/bin/env',
      // Without tap's process-info hook (NODE_OPTIONS) in the CLI's node.
      ['-u', 'NODE_OPTIONS', redocly, ...args],
      // cwd: the scratch directory, so no redocly.yaml of the repository changes the rules.
      {
        cwd: scratch,
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        timeout: 120_000,
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

type Workflow = {
  workflowId: string;
  status: string;
  executedSteps: Array<{ stepId: string; status: string; checks: Array<{ passed: boolean }> }>;
};

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const download = async (url: string) => {
  const res = await fetch(url);
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
};

t.test('llms.txt: the index, and every link in it resolves', async (t) => {
  const { res, bytes } = await download(`${base}/docs/llms.txt`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
  const text = bytes.toString('utf8');
  t.match(text, /^# Agent platform\n\n> .+\n/);
  t.match(text, /\n## Contracts\n/);
  const links = [...text.matchAll(/\]\((https?:\/\/[^)\s]+)\)/g)].map((m) => m[1]!);
  for (const expected of [
    '/auth.md',
    '/openapi.json',
    '/openapi.yaml',
    '/arazzo.yaml',
    '/mcp',
    '/agent-public-contracts/v1/knowledge-manifest.json',
    '/.well-known/oauth-protected-resource/api/agent',
    '/.well-known/oauth-protected-resource/mcp',
  ]) {
    t.ok(links.includes(`${base}${expected}`), `links ${expected}`);
  }
  for (const link of links) {
    t.ok(link.startsWith(`${base}/`), `${link} is on this deployment`);
    const res = await fetch(link);
    if (link !== `${base}/mcp`) {
      t.equal(res.status, 200, `GET ${link}`);
      continue;
    }
    // The MCP endpoint wants a token; without one it answers 401 pointing at
    // its metadata, which is what an agent needs to start.
    t.equal(res.status, 401, `GET ${link}`);
    t.match(
      res.headers.get('www-authenticate'),
      /resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource\/mcp"/,
    );
  }
});

t.test('knowledge manifest: versions, launch state, and hashes of the served bytes', async (t) => {
  const { res, bytes } = await download(MANIFEST);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
  const manifest = JSON.parse(bytes.toString('utf8'));
  t.match(manifest, {
    manifest_version: '1',
    service: { base_url: base },
    agent_api: { base_path: '/api/agent/v1', version: '1.0.0', launch_state: 'Live', contract_status: 'implemented' },
  });
  const docs = manifest.documents as Array<{
    id: string;
    url: string;
    media_type: string;
    version: string;
    sha256: string;
    bytes: number;
  }>;
  t.same(docs.map((d) => new URL(d.url).pathname).sort(), [
    '/.well-known/oauth-protected-resource/api/agent',
    '/.well-known/oauth-protected-resource/mcp',
    '/arazzo.yaml',
    '/auth.md',
    '/docs/llms.txt',
    '/openapi.json',
    '/openapi.yaml',
  ]);
  for (const doc of docs) {
    const served = await download(doc.url);
    t.equal(served.res.status, 200, doc.url);
    t.equal(doc.sha256, sha256(served.bytes), `sha256 of ${doc.url}`);
    t.equal(doc.bytes, served.bytes.length, `size of ${doc.url}`);
    t.equal(doc.media_type, served.res.headers.get('content-type'), `media type of ${doc.url}`);
    t.match(doc.version, /^\d+(\.\d+\.\d+)?$/);
  }
  t.equal(docs.find((d) => d.id === 'openapi-json')?.version, '1.0.0');

  // The hash is the ETag; a poller that has it gets 304 without a body.
  const etag = res.headers.get('etag');
  t.equal(etag, `"${sha256(bytes)}"`);
  const again = await fetch(MANIFEST, { headers: { 'if-none-match': `W/"other", ${etag}` } });
  t.equal(again.status, 304);
  t.equal((await again.arrayBuffer()).byteLength, 0);
  const arazzo = docs.find((d) => d.id === 'arazzo')!;
  const cached = await fetch(arazzo.url, { headers: { 'if-none-match': `"${arazzo.sha256}"` } });
  t.equal(cached.status, 304);
});

t.test('Arazzo quickstart: lints clean and runs green against this server', async (t) => {
  const { res, bytes } = await download(`${base}/arazzo.yaml`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'application/yaml; charset=utf-8');
  const file = path.join(scratch, 'arazzo.yaml');
  writeFileSync(file, bytes);

  const lint = await run(['lint', file, '--format=json']);
  if (lint.code !== 0) t.comment(lint.stdout, lint.stderr);
  t.equal(lint.code, 0, 'redocly lint exits 0');
  const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] };
  t.same(report.totals, { errors: 0, warnings: 0, ignored: 0 }, JSON.stringify(report.problems));

  const out = path.join(scratch, 'respect.json');
  const respect = await run(['respect', file, '--json-output', out]);
  if (respect.code !== 0) t.comment(respect.stdout, respect.stderr); // respect masks secrets on the console
  t.equal(respect.code, 0, 'redocly respect exits 0');
  // The JSON report holds the registration's assertion unmasked: read it and delete it.
  const result = JSON.parse(readFileSync(out, 'utf8'));
  rmSync(out);
  t.equal(result.status, 'success');
  const [workflow, ...others] = Object.values(
    result.files as Record<string, { executedWorkflows: Workflow[] }>,
  ).flatMap((f) => f.executedWorkflows);
  t.equal(others.length, 0);
  t.equal(workflow?.workflowId, 'agentQuickstart');
  t.equal(workflow?.status, 'success');
  t.same(
    workflow?.executedSteps.map((s) => s.stepId),
    ['registerAnonymously', 'exchangeToken', 'getCapabilities', 'listBoards'],
  );
  for (const step of workflow?.executedSteps ?? []) {
    t.equal(step.status, 'success', step.stepId);
    t.ok(step.checks.length > 0 && step.checks.every((c) => c.passed), `${step.stepId}: every check passed`);
  }
  // Neither the assertion nor a token may end up in the server's logs.
  t.notMatch(logs(), /eyJ[A-Za-z0-9_-]{10,}\./);
});
