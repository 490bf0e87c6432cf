// Per-tenant fairness: one tenant's backlog of long jobs never holds every
// worker slot. With 4 slots and a cap of 2 per tenant, another tenant's chat
// turn starts at once, and the noisy tenant never runs more than 2 at a time.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createMember, enqueue } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);
const noisy = await createMember(db, 'admin');
const quiet = await createMember(db, 'admin');
const headers = (m: { token: string; tenantId: string }, key?: string) => ({
  authorization: `Bearer ${m.token}`,
  'x-tenant-id': m.tenantId,
  ...(key ? { 'idempotency-key': key } : {}),
});
const runningOf = (tenantId: string) =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from jobs where tenant_id = ${tenantId} and status = 'running'`);

t.test("one tenant's backlog leaves room for another tenant's chat turn", async (t) => {
  const worker = await startTestWorker(t, databaseUrl, { WORKER_CONCURRENCY: '4', WORKER_TENANT_CONCURRENCY: '2' });
  // Twelve jobs of about 4 s: without a cap they would fill all four slots for 12 s.
  const backlog: string[] = [];
  for (let i = 0; i < 12; i++) backlog.push(await enqueue(db, { kind: 'diag.steps', tenantId: noisy.tenantId, input: { steps: 20, delayMs: 200 } }));
  await waitFor('the noisy tenant to run at its cap', async () => (await runningOf(noisy.tenantId)) === 2);

  let most = 0;
  const sampler = setInterval(() => {
    runningOf(noisy.tenantId).then((n) => (most = Math.max(most, n)), () => undefined);
    most = Math.max(most, worker.tenantLoad()[noisy.tenantId] ?? 0);
  }, 50);
  t.teardown(() => clearInterval(sampler));

  const sessionId = (await app.inject({ method: 'POST', url: '/api/chat/sessions', headers: headers(quiet), payload: { title: 'Quiet' } })).json().id as string;
  const sentAt = Date.now();
  const sent = await app.inject({ method: 'POST', url: '/api/chat/send', headers: headers(quiet, 'fair-key-0001'), payload: { sessionId, message: 'Are you there?' } });
  t.equal(sent.statusCode, 202);
  const jobId = sent.json().jobId as string;
  const started = await waitFor('the quiet tenant\'s turn to finish', async () => {
    const row = await db.maybeOne(sql.type(z.object({ status: z.string(), started_at: z.string().nullable() }))`
      select status, started_at from jobs where id = ${jobId}`);
    return row?.status === 'succeeded' ? row : null;
  }, 20_000);
  const waitedMs = new Date(started.started_at!).getTime() - sentAt;
  t.ok(waitedMs < 2_000, `the chat turn started ${waitedMs} ms after it was sent (the noisy tenant holds 12 jobs of 4 s)`);

  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.equal(most, 2, 'the noisy tenant never ran more than its cap of 2');
  const left = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from jobs where id = any(${sql.array(backlog, 'uuid')}) and status = 'queued'`);
  t.ok(left >= 6, `the backlog is still waiting its turn (${left} queued)`);
});
