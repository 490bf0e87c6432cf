// Fuzz suite over every operation of /openapi.json: a bounded, seeded set of
// valid requests (from the schemas) and invalid ones (wrong types, missing
// and extra fields, huge/empty strings, NUL and lone surrogates, deep
// nesting, extreme numbers, crafted cursors, over-long and badly encoded path
// parameters, invalid JSON, wrong content types, oversized bodies, bad
// credentials and tenants). Pass: no 5xx, no hang, every error in its
// surface's shape, nothing written by a refused request. FUZZ_SEED=<n>
// replays another seed; a failure prints the request.
import t from 'tap';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { fingerprinter } from '../helpers/db-fingerprint.ts';
import { CLOSED_UPSTREAMS, loadOperations, UPSTREAM_ANSWERS, type Operation } from '../helpers/openapi-ops.ts';
import { authFor, createWorkspace, PURCHASE_WEBHOOK_SECRET, type Workspace } from '../helpers/principals.ts';
import { invalidRequests, seedOf, toRequest, validParts, type FuzzRequest, type Known } from './generate.ts';
import { createRunner, type Verdict } from './runner.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 1806);
const VALID_PER_OPERATION = 2;

/**
 * Known findings in code this suite may not change (the channels area is
 * being reworked by a colleague): failures of these operations are reported
 * as todo with the reason, not hidden. Remove an entry once it is fixed.
 */
const KNOWN_FINDINGS: Record<string, string> = {};

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl, {
  AGENT_API_RATE_LIMIT: '1000000',
  PURCHASE_WEBHOOK_SECRET,
  ...CLOSED_UPSTREAMS,
});
const fingerprints = await fingerprinter(t, databaseUrl);
const runner = createRunner(app, fingerprints);
const operations = await loadOperations(app);

/** Real ids for the path and query parameters the operation names, made in the operation's own workspace. */
async function knownIds(op: Operation, w: Workspace): Promise<Known> {
  const names = new Set(op.params.map((p) => p.name));
  const ids: Record<string, string[]> = { runnerId: [w.runner.runnerId], tenantId: [w.tenantId] };
  const as = { authorization: `Bearer ${w.admin.token}`, 'x-tenant-id': w.tenantId };
  const post = async (url: string, payload: object, headers: Record<string, string> = as) => {
    const res = await app.inject({ method: 'POST', url, headers, payload });
    return res.statusCode < 300 ? (res.json() as { id: string }).id : undefined;
  };
  if (names.has('companyId') || names.has('companyRef')) {
    const company = await post('/api/companies', { name: 'Fuzz Co' });
    if (company) {
      ids.companyId = ids.companyRef = [company];
      const agent = await post(`/api/companies/${company}/agents`, { name: 'Fuzz agent' });
      const task = await post(`/api/companies/${company}/tasks`, { title: 'Fuzz task' });
      if (agent) ids.agentId = [agent];
      if (task) ids.taskId = ids.taskRef = [task];
    }
  }
  if (names.has('boardId')) {
    const agentHeaders = { authorization: `Bearer ${w.agent.token}`, 'idempotency-key': `fuzz-board-${op.id}` };
    const company = ids.companyId?.[0] ?? (await post('/api/companies', { name: 'Fuzz board scope' }));
    const board = company
      ? await post('/api/agent/v1/boards', { title: 'Fuzz', scope_type: 'company', scope_id: company }, agentHeaders)
      : undefined;
    if (board) ids.boardId = [board];
  }
  if (names.has('sessionId')) {
    const session = await post('/api/chat/sessions', {});
    if (session) ids.sessionId = [session];
  }
  return { tenantId: w.tenantId, ids };
}

async function signingKeyOf(op: Operation, w: Workspace) {
  if (!op.params.some((p) => p.name === 'x-signature')) return undefined;
  const res = await app.inject({
    url: '/api/provider-keys/signing-key',
    headers: { authorization: `Bearer ${w.admin.token}` },
  });
  return { key: res.json().signingKey as string, tenantId: w.tenantId };
}

const started = Date.now();
const statuses = new Map<number, number>();
const kinds = new Map<string, number>();
const failures = new Map<string, string[]>();
let requestCount = 0;

for (const [index, op] of operations.entries()) {
  // A workspace per operation: valid requests may delete the account, revoke the runner or log out.
  const w = await createWorkspace(app, db, config);
  const known = await knownIds(op, w);
  const seed = seedOf(SEED, op.key);
  const requests: FuzzRequest[] = [];
  for (let i = 0; i < VALID_PER_OPERATION; i++)
    requests.push(toRequest(op, 'valid', false, validParts(op, seed + i, known, i % 2 === 0)));
  requests.push(...invalidRequests(op, seed, validParts(op, seed, known, true)));
  const verdicts: Verdict[] = await runner.run(requests, authFor(op.security, w), {
    signingKey: await signingKeyOf(op, w),
    upstream: UPSTREAM_ANSWERS[op.id],
  });
  for (const v of verdicts) {
    if (!v.setLevel) {
      requestCount++;
      statuses.set(v.status, (statuses.get(v.status) ?? 0) + 1);
      kinds.set(v.request.kind, (kinds.get(v.request.kind) ?? 0) + 1);
    }
    if (v.problems.length) failures.set(op.key, [...(failures.get(op.key) ?? []), ...v.problems]);
  }
  if (index === 0) t.comment(`fuzz seed ${SEED} (FUZZ_SEED to replay another)`);
  if (process.env.FUZZ_TRACE) t.comment(`${op.key}: ${verdicts.length} requests, ${Date.now() - started} ms`);
}

t.test('every operation answered every generated request within its surface rules', async (t) => {
  for (const [key, problems] of failures) {
    const op = operations.find((o) => o.key === key)!;
    const todo = KNOWN_FINDINGS[op.id];
    for (const problem of problems.slice(0, 5)) t.fail(`${op.id} (${key}): ${problem}`, todo ? { todo } : {});
    if (problems.length > 5) t.comment(`${op.id}: ${problems.length - 5} more problems`);
  }
  const open = [...failures.keys()].filter((key) => !KNOWN_FINDINGS[operations.find((o) => o.key === key)!.id]);
  t.same(open, [], `operations with problems (seed ${SEED})`);
});

t.test('summary', async (t) => {
  t.ok(operations.length > 100, 'the document lists the operations');
  const byStatus = [...statuses]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s || 'none'}: ${n}`)
    .join(', ');
  const byKind = [...kinds]
    .sort()
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  t.comment(
    `fuzz: seed ${SEED}, ${operations.length} operations, ${requestCount} requests, ${Math.round((Date.now() - started) / 1000)} s`,
  );
  t.comment(`statuses: ${byStatus}`);
  t.comment(`kinds: ${byKind}`);
});
