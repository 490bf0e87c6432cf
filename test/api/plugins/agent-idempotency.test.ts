// Idempotency-Key on Agent API mutations, through the board routes:
// recorded failures replayed, in-progress, the race, expiry after 24 hours.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { fingerprint } from '../../../core/idempotency.ts';
import { createRegistration } from '../../../core/identity/registrations.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { createBoardScopes, markClaimed } from '../../helpers/fixtures.ts';
import { agentAccessToken } from '../../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.2', claimTokenTtlS: 600 });
await markClaimed(db, registration.id);
const token = await agentAccessToken(app, config, registration, ['svc:boards:read', 'svc:boards:publish']);
const send = (url: string, payload: object, key: string) =>
  app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${token}`, 'idempotency-key': key } });
const { companyId } = await createBoardScopes(db, registration.tenant_id);
const board = (
  await send(
    '/api/agent/v1/boards',
    { title: 'B', scope_type: 'company', scope_id: companyId, content: { a: 1 } },
    'create-key-0001',
  )
).json().id as string;

t.test('a recorded failure is replayed as the same failure', async (t) => {
  const first = await send(`/api/agent/v1/boards/${board}/rotate-link`, {}, 'rotate-key-0001');
  t.equal(first.statusCode, 409, 'nothing published publicly yet');
  await send(`/api/agent/v1/boards/${board}/publish`, { visibility: 'private' }, 'publish-key-0001');
  const again = await send(`/api/agent/v1/boards/${board}/rotate-link`, {}, 'rotate-key-0001');
  t.equal(again.statusCode, 409);
  t.same(again.json(), first.json());
  t.equal(again.headers['idempotency-replayed'], 'true');
});

t.test('however the client encodes the path, the same mutation is the same request', async (t) => {
  const first = await send(`/api/agent/v1/boards/${board}/publish`, { visibility: 'private' }, 'encoded-key-001');
  t.equal(first.statusCode, 200);
  // The same board id with its first character percent-encoded, and the action too.
  const encodedId = `%${board.charCodeAt(0).toString(16)}${board.slice(1)}`;
  const again = await send(`/api/agent/v1/boards/${encodedId}/p%75blish`, { visibility: 'private' }, 'encoded-key-001');
  t.equal(again.statusCode, 200);
  t.equal(again.headers['idempotency-replayed'], 'true');
  t.same(again.json(), first.json());
});

t.test('a key whose first request still runs: 409 idempotency_in_progress', async (t) => {
  const path = `/api/agent/v1/boards/${board}/unpublish`;
  await db.query(sql.unsafe`
    insert into idempotency_records (scope, tenant_id, key, fingerprint)
    values (${`agent:${registration.principal_id}`}, ${registration.tenant_id}, 'running-key-01', ${fingerprint({ method: 'POST', path, body: {} })})`);
  const res = await send(path, {}, 'running-key-01');
  t.equal(res.statusCode, 409);
  t.match(res.json(), { code: 'idempotency_in_progress', next_action: 'retry_same_request_later' });
  // A different request under the key: refused (the strict body schema may already say 400).
  const other = await send(path, { extra: true }, 'running-key-01');
  t.ok([400, 409].includes(other.statusCode), `refused with ${other.statusCode} ${other.json().code}`);
});

t.test('identical requests at the same instant: exactly one runs', async (t) => {
  // Public publishing needs approval; private publishing runs at once.
  const before = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from board_versions where board_id = ${board}`,
  );
  const results = await Promise.all(
    Array.from({ length: 5 }, () =>
      app.inject({
        method: 'PUT',
        url: `/api/agent/v1/boards/${board}/content`,
        payload: { content: { raced: true } },
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'race-key-0001' },
      }),
    ),
  );
  const ok = results.filter((r) => r.statusCode === 200);
  t.ok(ok.length >= 1, 'at least the first succeeds');
  t.ok(
    results.every((r) => r.statusCode === 200 || (r.statusCode === 409 && r.json().code === 'idempotency_in_progress')),
    results.map((r) => r.statusCode).join(','),
  );
  t.equal(
    ok.filter((r) => r.headers['idempotency-replayed'] !== 'true').length,
    1,
    'one execution; the rest replays or in-progress',
  );
  const after = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from board_versions where board_id = ${board}`,
  );
  t.equal(after, before + 1, 'one new version');
});

t.test('after 24 hours a key is free again', async (t) => {
  const path = `/api/agent/v1/boards/${board}/publish`;
  const first = await send(path, { visibility: 'private' }, 'expiring-key-1');
  t.equal(first.statusCode, 200);
  t.equal((await send(path, { visibility: 'public' }, 'expiring-key-1')).json().code, 'idempotency_conflict');
  // The clock moves 24 hours on (records carry their own expiry).
  await db.query(
    sql.unsafe`update idempotency_records set expires_at = now() - interval '1 second' where key = 'expiring-key-1'`,
  );
  const later = await send(path, { visibility: 'public' }, 'expiring-key-1');
  t.equal(later.statusCode, 200, 'runs as a new request');
  t.not(later.headers['idempotency-replayed'], 'true');
});

t.test('keys: missing or outside 8-200 characters -> 400 invalid_idempotency_key', async (t) => {
  for (const key of [undefined, 'short', 'x'.repeat(201)]) {
    const res = await app.inject({
      method: 'POST',
      url: `/api/agent/v1/boards/${board}/unpublish`,
      payload: {},
      headers: { authorization: `Bearer ${token}`, ...(key ? { 'idempotency-key': key } : {}) },
    });
    t.equal(res.statusCode, 400);
    t.equal(res.json().code, 'invalid_idempotency_key');
  }
});

t.test('the published Agent API lists exactly the spec statuses per operation', async (t) => {
  const doc = (await app.inject('/openapi.json')).json();
  const expected: Record<string, string> = {
    listAgentCompanies: '200,400,401,402,403,404,429,503',
    getAgentCompanyRun: '200,400,401,402,403,404,429,503',
    listInsightBoards: '200,400,401,403,404,429,503',
    getInsightBoardPublication: '200,400,401,403,404,429,503',
    publishInsightBoard: '200,400,401,403,404,409,429,503',
    unpublishInsightBoard: '200,400,401,403,404,409,429,503',
    rotateInsightBoardLink: '200,400,401,403,404,409,429,503',
    restoreAgent: '200,400,401,403,404,409,429,503',
  };
  const found: Record<string, string> = {};
  for (const ops of Object.values<Record<string, { operationId: string; responses: Record<string, unknown> }>>(
    doc.paths,
  )) {
    for (const op of Object.values(ops)) found[op.operationId] = Object.keys(op.responses).sort().join(',');
  }
  for (const [id, statuses] of Object.entries(expected)) t.equal(found[id], statuses, id);
});
