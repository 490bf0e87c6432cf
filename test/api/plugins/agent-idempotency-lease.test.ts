// Idempotency-Key leases: a claim whose owner died (an api process killed
// with SIGKILL mid-request) answers 409 idempotency_in_progress within its
// lease and is taken over after it, over HTTP and MCP; the retry runs once
// and is replayed after. An operation and its recorded answer commit
// together: killed between the two, neither stays; a request whose claim was
// taken over is undone. A slow live request keeps its claim by renewing it,
// also when its client hung up; racing takeovers run the operation once.
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { claimIdempotencyKey, fingerprint } from '../../../core/idempotency.ts';
import { createRegistration } from '../../../core/identity/registrations.ts';
import { resources, signAccessToken } from '../../../core/identity/tokens.ts';
import { freePort } from '../../../ops/embedded-postgres.ts';
import { startTestServer } from '../../helpers/app.ts';
import { testEnv } from '../../helpers/config.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { createBoardScopes, markClaimed } from '../../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../../helpers/wait.ts';
import { spawnEntry } from '../../helpers/worker.ts';
import { startTcpProxy } from '../routes/ws/tcp-proxy.ts';

const LEASE_MS = 1000;
const databaseUrl = await createTestDatabase(t);
// The killed api process listens here; tokens name it, so they work in both processes.
const childPort = await freePort();
const childBase = `http://127.0.0.1:${childPort}`;
const api = await startTestServer(t, databaseUrl, {
  BASE_URL: childBase,
  AGENT_IDEMPOTENCY_LEASE_MS: String(LEASE_MS),
});
const { app, db, config } = api;

const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.3', claimTokenTtlS: 600 });
await markClaimed(db, registration.id);
const { companyId } = await createBoardScopes(db, registration.tenant_id);
const claims = {
  principalId: registration.principal_id,
  registrationId: registration.id,
  tenantId: registration.tenant_id,
  scopes: ['svc:boards:read' as const, 'svc:boards:publish' as const],
};
const agentToken = await signAccessToken(app.idpKeys, config.authUrl, resources(config.baseUrl).agent, claims, 600);
const mcpToken = await signAccessToken(app.idpKeys, config.authUrl, resources(config.baseUrl).mcp, claims, 600);

type Body = { title: string; scope_type: 'company' | 'agent'; scope_id: string; content?: unknown };
const newBody = (title: string): Body => ({ title, scope_type: 'company', scope_id: companyId, content: { title } });
const httpCreate = (key: string, body: Body) => ({
  method: 'POST' as const,
  url: '/api/agent/v1/boards',
  payload: body,
  headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': key },
});
const MCP_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};
const mcpCall = (key: string, body: Body) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'createInsightBoard', arguments: { ...body, idempotency_key: key } },
  });
type ToolResult = { isError?: boolean; content: Array<{ text: string }>; _meta?: Record<string, unknown> };
const mcpCreate = async (key: string, body: Body): Promise<ToolResult> => {
  const res = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
    payload: mcpCall(key, body),
  });
  return (res.json() as { result: ToolResult }).result;
};
const textOf = (r: ToolResult) => JSON.parse(r.content[0]!.text) as Record<string, unknown>;

const boardsTitled = (title: string) =>
  db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from insight_boards where title = ${title}`,
  );
const Claim = z.object({ state: z.string(), renewed: z.boolean(), live: z.boolean(), lease_expires_at: z.unknown() });
/** The key's record: renewed = its owner (with leases of leaseMs) extended it after the claim; live = the lease has not run out. */
const claimOf = (key: string, leaseMs = LEASE_MS) =>
  db.maybeOne(sql.type(Claim)`
  select state, coalesce(lease_expires_at > created_at + make_interval(secs => ${leaseMs / 1000}), false) as renewed,
    coalesce(lease_expires_at > now(), false) as live, lease_expires_at
  from idempotency_records where key = ${key}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `statement` in a transaction held open until the returned function is called. */
async function holdInTransaction(statement: ReturnType<typeof sql.unsafe>): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let held!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  const done = db.transaction(async (tx) => {
    await tx.query(statement);
    held();
    await released;
  });
  await Promise.race([isHeld, done]);
  return async () => {
    release();
    await done;
  };
}

/** Makes every board insert wait: an operation "still running". */
const blockBoardInserts = () => holdInTransaction(sql.unsafe`lock table insight_boards in share mode`);

/** Holds a key's record row: a request's last statement, the record of its answer, waits on it. */
const holdRecord = (key: string) =>
  holdInTransaction(sql.unsafe`select 1 from idempotency_records where key = ${key} for update`);

/** A second api process with a longer lease, on childPort, to be killed mid-request. */
const CHILD_LEASE_MS = 4000;
async function startChildApi(t: Test) {
  const child = spawnEntry(
    t,
    'api/server.ts',
    testEnv(databaseUrl, {
      LOG_LEVEL: 'info',
      BASE_URL: childBase,
      PORT: String(childPort),
      AGENT_IDEMPOTENCY_LEASE_MS: String(CHILD_LEASE_MS),
    }),
  );
  await waitForOutput(child, /api listening/, 90_000);
  return child;
}

/** Sends the identical create until it is not refused as in progress (its claim's lease ran out). */
const retryUntilTakenOver = (key: string, body: Body, what: string) =>
  waitFor(
    what,
    async () => {
      const res = await app.inject(httpCreate(key, body));
      return res.statusCode === 409 ? null : res;
    },
    15_000,
  );

t.test('Idempotency takeover after a killed request', async (t) => {
  const child = await startChildApi(t);
  const httpKey = `killed-http-${randomUUID()}`;
  const mcpKey = `killed-mcp-${randomUUID()}`;
  const httpBody = newBody(`Killed over HTTP ${httpKey}`);
  const mcpBody = newBody(`Killed over MCP ${mcpKey}`);

  const unblock = await blockBoardInserts();
  const inFlight = [
    fetch(`${childBase}/api/agent/v1/boards`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${agentToken}`,
        'idempotency-key': httpKey,
        'content-type': 'application/json',
      },
      body: JSON.stringify(httpBody),
    }),
    fetch(`${childBase}/mcp`, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` },
      body: mcpCall(mcpKey, mcpBody),
    }),
  ].map((p) =>
    p.then(
      (r) => `answered ${r.status}`,
      () => 'connection lost',
    ),
  );
  await waitFor(
    'both claims renewed by the running child',
    async () => (await claimOf(httpKey, CHILD_LEASE_MS))?.renewed && (await claimOf(mcpKey, CHILD_LEASE_MS))?.renewed,
    30_000,
  );
  child.child.kill('SIGKILL');
  await child.exited;
  await unblock();
  t.same(await Promise.all(inFlight), ['connection lost', 'connection lost'], 'the process died mid-request');
  t.equal(await boardsTitled(httpBody.title), 0, 'nothing was created');
  t.equal(await boardsTitled(mcpBody.title), 0);

  // Within the lease the claim still looks like a running request.
  t.ok((await claimOf(httpKey))?.live, "the dead owner's lease has not run out yet");
  const early = await app.inject(httpCreate(httpKey, httpBody));
  t.equal(early.statusCode, 409);
  t.match(early.json(), { code: 'idempotency_in_progress', next_action: 'retry_same_request_later' });
  const earlyTool = await mcpCreate(mcpKey, mcpBody);
  t.equal(earlyTool.isError, true);
  t.match(textOf(earlyTool), { code: 'idempotency_in_progress' });

  // After it, the identical retry takes the claim over and runs once.
  const taken = await retryUntilTakenOver(httpKey, httpBody, 'the HTTP retry to take the claim over');
  t.equal(taken.statusCode, 201, 'created by the retry');
  t.not(taken.headers['idempotency-replayed'], 'true');
  t.equal(await boardsTitled(httpBody.title), 1, 'one board');
  const replay = await app.inject(httpCreate(httpKey, httpBody));
  t.equal(replay.statusCode, 201);
  t.equal(replay.headers['idempotency-replayed'], 'true', 'the next identical retry replays');
  t.same(replay.json(), taken.json());

  const tool = await waitFor(
    'the MCP retry to take the claim over',
    async () => {
      const r = await mcpCreate(mcpKey, mcpBody);
      return r.isError && textOf(r).code === 'idempotency_in_progress' ? null : r;
    },
    15_000,
  );
  t.notOk(tool.isError, 'created by the retry');
  t.notOk(tool._meta?.idempotency_replayed);
  t.equal(await boardsTitled(mcpBody.title), 1, 'one board');
  const toolReplay = await mcpCreate(mcpKey, mcpBody);
  t.same(toolReplay._meta, { idempotency_replayed: true });
  t.same(textOf(toolReplay), textOf(tool));
});

const recordsWaiting = () =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pg_stat_activity
    where wait_event_type = 'Lock' and query like '%set state = ''completed''%'`);

t.test(
  'an api killed after its operation ran, before its answer was recorded: neither stays, the retry runs once',
  async (t) => {
    const child = await startChildApi(t);
    const key = `unrecorded-${randomUUID()}`;
    const body = newBody(`Killed before its record ${key}`);
    const unblock = await blockBoardInserts();
    const sent = fetch(`${childBase}/api/agent/v1/boards`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(
      (r) => `answered ${r.status}`,
      () => 'connection lost',
    );
    await waitFor('the claim', () => claimOf(key, CHILD_LEASE_MS));
    const release = await holdRecord(key);
    await unblock();
    await waitFor('the board written and its answer about to be recorded', async () => (await recordsWaiting()) > 0);
    child.child.kill('SIGKILL');
    await child.exited;
    await release();
    t.equal(await sent, 'connection lost', 'the process died between its operation and its record');
    t.equal(await boardsTitled(body.title), 0, 'the board went with the answer that was never recorded');

    const taken = await retryUntilTakenOver(key, body, 'the retry to take the claim over');
    t.equal(taken.statusCode, 201, 'created by the retry');
    t.equal(await boardsTitled(body.title), 1, 'one board');
    t.equal((await app.inject(httpCreate(key, body))).headers['idempotency-replayed'], 'true');
  },
);

t.test('a request whose claim was taken over while it ran is undone: 409, and the retry runs once', async (t) => {
  const key = `taken-${randomUUID()}`;
  const body = newBody(`Taken over ${key}`);
  const unblock = await blockBoardInserts();
  const first = app.inject(httpCreate(key, body));
  await waitFor('the claim', () => claimOf(key));
  // What a takeover does to the claim: another owner, with a lease of its own (nobody renews it here).
  await db.query(sql.unsafe`
    update idempotency_records set lease_owner = ${randomUUID()}, lease_expires_at = now() + interval '1 second'
    where key = ${key}`);
  await unblock();
  const late = await first;
  t.equal(late.statusCode, 409);
  t.match(late.json(), { code: 'idempotency_in_progress', next_action: 'retry_same_request_later' });
  t.equal(await boardsTitled(body.title), 0, "the late request's board was rolled back with its refused record");
  const retried = await retryUntilTakenOver(key, body, 'the retry to take the lapsed claim over');
  t.equal(retried.statusCode, 201);
  t.equal(await boardsTitled(body.title), 1, 'one board');
});

t.test('a slow live request keeps its claim past the lease: it renews', async (t) => {
  const key = `slow-${randomUUID()}`;
  const body = newBody(`Slow ${key}`);
  const unblock = await blockBoardInserts();
  const first = app.inject(httpCreate(key, body));
  await waitFor('the claim', () => claimOf(key));
  await sleep(LEASE_MS * 2.5);
  t.match(await claimOf(key), { state: 'in_progress', renewed: true, live: true });
  const during = await app.inject(httpCreate(key, body));
  t.equal(during.statusCode, 409);
  t.equal(during.json().code, 'idempotency_in_progress', 'not taken over');
  await unblock();
  const done = await first;
  t.equal(done.statusCode, 201);
  t.not(done.headers['idempotency-replayed'], 'true');
  t.match(await claimOf(key), { state: 'completed', lease_expires_at: null });
  t.equal(await boardsTitled(body.title), 1);
  t.equal((await app.inject(httpCreate(key, body))).headers['idempotency-replayed'], 'true');
});

t.test('a request whose client hung up keeps renewing until its operation ends, then records', async (t) => {
  const key = `gone-${randomUUID()}`;
  const body = newBody(`Client gone ${key}`);
  const unblock = await blockBoardInserts();
  const abort = new AbortController();
  const sent = fetch(`${api.url}/api/agent/v1/boards`, {
    method: 'POST',
    signal: abort.signal,
    body: JSON.stringify(body),
    headers: { authorization: `Bearer ${agentToken}`, 'idempotency-key': key, 'content-type': 'application/json' },
  }).catch(() => 'aborted');
  await waitFor('the claim', () => claimOf(key));
  abort.abort();
  t.equal(await sent, 'aborted');
  await sleep(LEASE_MS * 2);
  t.match(await claimOf(key), { state: 'in_progress', live: true }, 'the operation still runs: still renewed');
  await unblock();
  await waitFor('the outcome recorded', async () => (await claimOf(key))?.state === 'completed');
  t.match(await claimOf(key), { lease_expires_at: null });
  const retry = await app.inject(httpCreate(key, body));
  t.equal(retry.statusCode, 201);
  t.equal(retry.headers['idempotency-replayed'], 'true');
  t.equal(await boardsTitled(body.title), 1);
});

t.test('racing takeovers of a dead claim: exactly one runs', async (t) => {
  const key = `race-${randomUUID()}`;
  const body = newBody(`Raced ${key}`);
  // The claim of an owner that stopped renewing (as a killed process does).
  const agent = { principalId: registration.principal_id, tenantId: registration.tenant_id } as Parameters<
    typeof app.agentKeys.claim
  >[0];
  const dead = await app.agentKeys.claim(agent, key, { method: 'POST', path: '/api/agent/v1/boards', body });
  if (dead.kind !== 'run') throw new Error('expected a new claim');
  dead.claimed.stopRenewing();
  const denied = await app.inject(httpCreate(key, body));
  t.equal(denied.json().code, 'idempotency_in_progress', 'within the lease');
  await waitFor('the lease to run out', async () => !(await claimOf(key))?.live);

  const results = await Promise.all(Array.from({ length: 6 }, () => app.inject(httpCreate(key, body))));
  const ran = results.filter((r) => r.statusCode === 201 && r.headers['idempotency-replayed'] !== 'true');
  t.equal(ran.length, 1, `one takeover ran: ${results.map((r) => r.statusCode).join(',')}`);
  t.ok(
    results.every((r) => r.statusCode === 201 || r.json().code === 'idempotency_in_progress'),
    'the others: in progress or replayed',
  );
  t.equal(await boardsTitled(body.title), 1, 'one board');

  // The dead owner's late outcome is fenced off: the takeover's record stands.
  await app.agentKeys.finish(dead.claimed, 201, { stale: true });
  const replay = await app.inject(httpCreate(key, body));
  t.same(replay.json(), ran[0]!.json());
});

t.test('the takeover statement itself: of many claimants of an expired lease, one wins', async (t) => {
  const input = {
    scope: `agent:${registration.principal_id}`,
    tenantId: registration.tenant_id,
    key: `core-race-${randomUUID()}`,
    fingerprint: fingerprint({ x: 1 }),
  };
  const first = await claimIdempotencyKey(db, { ...input, lease: { owner: randomUUID(), ms: LEASE_MS } });
  t.same(first, { kind: 'new' });
  await db.query(
    sql.unsafe`update idempotency_records set lease_expires_at = now() - interval '1 second' where key = ${input.key}`,
  );
  const claims = await Promise.all(
    Array.from({ length: 4 }, () =>
      claimIdempotencyKey(db, { ...input, lease: { owner: randomUUID(), ms: LEASE_MS } }),
    ),
  );
  t.same(claims.map((c) => c.kind).sort(), ['in_progress', 'in_progress', 'in_progress', 'new']);
  const other = await claimIdempotencyKey(db, {
    ...input,
    fingerprint: fingerprint({ x: 2 }),
    lease: { owner: randomUUID(), ms: LEASE_MS },
  });
  t.same(other, { kind: 'conflict' }, 'another request under the key is still a conflict');
});

t.test('an unrecorded outcome releases the claim: the identical retry runs at once', async (t) => {
  const key = `release-${randomUUID()}`;
  const agent = { principalId: registration.principal_id, tenantId: registration.tenant_id } as Parameters<
    typeof app.agentKeys.claim
  >[0];
  const mutation = { method: 'POST', path: '/api/agent/v1/boards', body: newBody(`Released ${key}`) };
  const first = await app.agentKeys.claim(agent, key, mutation);
  if (first.kind !== 'run') throw new Error('expected a new claim');
  await app.agentKeys.finish(first.claimed, 503, null);
  t.equal(await claimOf(key), null, 'no record left');
  const again = await app.agentKeys.claim(agent, key, mutation);
  t.equal(again.kind, 'run');
  if (again.kind === 'run') await app.agentKeys.finish(again.claimed, 201, { ok: true });
  t.match(await app.agentKeys.claim(agent, key, mutation), { kind: 'replay', status: 201, body: { ok: true } });
});

t.test('PostgreSQL away as a refusal goes out: a 503 is not turned into a 500, the claim lapses', async (t) => {
  // An api of its own, through a proxy the test cuts (found by npm run soak:
  // the claim's release threw inside onSend and Fastify's fallback answered 500).
  const proxy = await startTcpProxy(databaseUrl);
  const cut = await startTestServer(t, proxy.url, { AGENT_IDEMPOTENCY_LEASE_MS: String(LEASE_MS) });
  t.teardown(async () => {
    await cut.close().catch((error: Error) => t.comment(`pool end after the outage: ${error.message}`));
    await proxy.close();
  });
  const agent = { principalId: registration.principal_id, tenantId: registration.tenant_id } as Parameters<
    typeof app.agentKeys.claim
  >[0];
  const failed = `outage-failed-${randomUUID()}`;
  const claim = await cut.app.agentKeys.claim(agent, failed, {
    method: 'POST',
    path: '/api/agent/v1/boards',
    body: newBody(failed),
  });
  if (claim.kind !== 'run') throw new Error('expected a new claim');
  await proxy.cut();
  await cut.app.agentKeys.finish(claim.claimed, 503, { code: 'temporarily_disabled' });
  t.pass('letting go of a claim while PostgreSQL is away does not throw (it lapses after its lease)');
  await proxy.restore();
  await waitFor('the failed claim to lapse', async () => {
    // 409 idempotency_in_progress until the lease runs out.
    const again = await app.agentKeys
      .claim(agent, failed, { method: 'POST', path: '/api/agent/v1/boards', body: newBody(failed) })
      .catch(() => null);
    if (again?.kind === 'run') await app.agentKeys.finish(again.claimed, 503, null);
    return again?.kind === 'run';
  });
});
