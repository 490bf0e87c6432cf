// Input PostgreSQL cannot store (NUL, unpaired surrogates) and JSON nested
// past the limit are refused before any route runs: 400 in the surface's
// shape naming the field, nothing written. These once answered 500.
import t from 'tap';
import { sql } from '../../core/db/pool.ts';
import { createRegistration } from '../../core/identity/registrations.ts';
import { findInputProblem, MAX_DEPTH } from '../../api/plugins/input-guard.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, markClaimed } from '../helpers/fixtures.ts';
import { agentAccessToken } from '../helpers/principals.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
const member = await createMember(db, 'admin');
const person = { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId };
const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const count = async (table: string) =>
  Number(await db.oneFirst(sql.unsafe`select count(*) from ${sql.identifier([table])}`));

t.test('the walker: strings, keys and depth, without recursion', async (t) => {
  t.equal(findInputProblem({ a: ['fine', { b: 'ok 😀' }] }), null, 'paired surrogates are fine');
  t.match(findInputProblem({ a: ['x', 'nul\u0000'] }), { path: 'a/1', message: /NUL/ });
  t.match(findInputProblem({ a: '\ud800' }), { path: 'a', message: /unpaired/ });
  t.match(findInputProblem({ a: 'x\udc00' }), { path: 'a', message: /unpaired/ });
  t.match(findInputProblem({ 'k\u0000': 1 }), { message: /property name/ });
  t.equal(findInputProblem(JSON.parse(nested(MAX_DEPTH - 1))), null);
  t.match(findInputProblem(JSON.parse(nested(100_000))), { message: `nests deeper than ${MAX_DEPTH} levels` });
});

t.test('platform routes: 400 invalid_request naming the field, nothing stored', async (t) => {
  const before = await count('contact_submissions');
  const cases: Array<[string, string, string]> = [
    [
      'POST',
      '/api/contact/',
      '{"name":"Ada\\u0000","email":"ada@example.test","message":"hello there, a long enough message"}',
    ],
    [
      'POST',
      '/api/contact/',
      '{"name":"Ada","email":"ada@example.test","message":"lone \\ud800 surrogate in a message"}',
    ],
    [
      'POST',
      '/api/contact/',
      `{"name":"Ada","email":"ada@example.test","message":"hello there, a long enough message","x":${nested(5000)}}`,
    ],
  ];
  for (const [method, url, payload] of cases) {
    const res = await app.inject({
      method: method as 'POST',
      url,
      payload,
      headers: { 'content-type': 'application/json' },
    });
    t.equal(res.statusCode, 400, payload.slice(0, 60));
    t.match(res.json(), { error: 'invalid_request', status: 400, details: [{ path: /^body\./ }] });
  }
  t.equal(await count('contact_submissions'), before, 'nothing stored');

  const board = await app.inject({
    method: 'POST',
    url: '/api/boards',
    headers: { ...person, 'content-type': 'application/json' },
    payload: `{"title":"T","scopeType":"agent","scopeId":"a","content":${nested(5000)}}`,
  });
  t.equal(board.statusCode, 400, 'deep board content');
  t.match(board.json().message, /nests deeper than 64 levels/);
  t.equal(
    (await app.inject({ method: 'GET', url: '/api/companies?cursor=%00', headers: person })).statusCode,
    400,
    'NUL in a query value',
  );
  const path = await app.inject({ method: 'GET', url: '/api/companies/%00abc', headers: person });
  t.equal(path.statusCode, 400, 'NUL in a path parameter');
  t.match(path.json().details, [{ path: /^path/ }]);
});

t.test('Agent API: its own shape, and the Idempotency-Key record is not touched', async (t) => {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.9', claimTokenTtlS: 600 });
  await markClaimed(db, registration.id);
  const token = await agentAccessToken(app, config, registration, ['svc:boards:read', 'svc:boards:publish']);
  const res = await app.inject({
    method: 'POST',
    url: '/api/agent/v1/boards',
    headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'deep-one', 'content-type': 'application/json' },
    payload: `{"title":"Deep","scope_type":"company","scope_id":"acme","content":${nested(5000)}}`,
  });
  t.equal(res.statusCode, 400);
  t.match(res.json(), { code: 'invalid_request', next_action: 'fix_request' });
  t.equal(
    Number(await db.oneFirst(sql.unsafe`select count(*) from idempotency_records where key = 'deep-one'`)),
    0,
    'no idempotency record',
  );
});

t.test('the claim page answers with a page, not JSON', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/agent/identity/claim/verify/abc',
    payload: 'action=signin&email=a%00b',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(res.statusCode, 400);
  t.match(res.headers['content-type'], /text\/html/);
});
