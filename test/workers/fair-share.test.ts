// Fair sharing of the workers by account (migration 0037): jobs start in a
// fair order tagged at enqueue, so one account's backlog never decides when
// another account's work starts, a lone account has every slot, and accounts
// that both wait share in proportion to their plans' weights. Checked by
// order of events, never by timings.
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { buildTestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createAccount } from '../helpers/fixtures.ts';
import { waitFor, waitForOutput } from '../helpers/wait.ts';
import { spawnWorkerProcess, startTestWorker } from '../helpers/worker.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db } = await buildTestApp(t, databaseUrl);

const Started = z.object({
  id: z.string(),
  tenant_id: z.string(),
  status: z.string(),
  started_at: z.string().nullable(),
});
const jobsOf = (tenants: readonly string[]) =>
  db.any(sql.type(Started)`
  select id, tenant_id, status, started_at from jobs where tenant_id = any(${sql.array(tenants, 'uuid')}) order by started_at nulls last, id`);
const running = async (tenants: readonly string[]) =>
  (await jobsOf(tenants)).filter((j) => j.status === 'running').length;
const waits = (tenantId: string, n: number, ms: number) =>
  Array.from({ length: n }, () => ({ kind: 'diag.wait', tenantId, input: { ms } }));
const cancelAll = (tenants: readonly string[]) =>
  db.query(sql.unsafe`
  update jobs set status = case when status = 'queued' then 'cancelled' else 'cancelling' end, finished_at = case when status = 'queued' then now() end
  where tenant_id = any(${sql.array(tenants, 'uuid')}) and status in ('queued', 'running')`);

t.test('a lone account uses every slot of an idle platform', async (t) => {
  const lone = await createAccount(db, 1);
  await startTestWorker(t, databaseUrl, { WORKER_IO_CONCURRENCY: '6' });
  await db.transaction((tx) => enqueueJobs(tx, waits(lone.tenants[0]!, 8, 60_000)));
  await waitFor('six of its jobs running at once', async () => (await running(lone.tenants)) === 6);
  t.pass('six slots, six jobs of one account');
  await cancelAll(lone.tenants);
});

t.test(
  "one account floods from 4 workspaces on two worker processes: another account's turn starts before the flood drains",
  async (t) => {
    const noisy = await createAccount(db, 4);
    const quiet = await createAccount(db, 1);
    const env = { WORKER_IO_CONCURRENCY: '2', WORKER_CONCURRENCY: '1', LOG_LEVEL: 'info' };
    const workers = [spawnWorkerProcess(t, databaseUrl, env), spawnWorkerProcess(t, databaseUrl, env)];
    for (const w of workers) await waitForOutput(w, /worker started/);
    // Ten jobs of 400 ms per workspace: four slots in all, about four seconds of flood.
    for (const tenantId of noisy.tenants) await db.transaction((tx) => enqueueJobs(tx, waits(tenantId, 10, 400)));
    await waitFor('the flood to fill all four slots', async () => (await running(noisy.tenants)) === 4).catch(
      (e: Error) => {
        throw new Error(`${e.message}\n${workers.map((w) => w.output()).join('\n')}`);
      },
    );

    const headers = { authorization: `Bearer ${quiet.token}`, 'x-tenant-id': quiet.tenants[0]! };
    const sessionId = (
      await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { title: 'Quiet' } })
    ).json().id as string;
    const sent = await app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: { ...headers, 'idempotency-key': 'quiet-turn-0001' },
      payload: { sessionId, message: 'Am I next?' },
    });
    t.equal(sent.statusCode, 202, sent.body);
    const turn = await waitFor(
      'the quiet turn to finish',
      async () => {
        const [row] = await jobsOf(quiet.tenants);
        return row?.status === 'succeeded' ? row : null;
      },
      60_000,
    );
    const flood = await jobsOf(noisy.tenants);
    const after = flood.filter((j) => !j.started_at || j.started_at > turn.started_at!).length;
    t.ok(
      after >= 24,
      `${after} of the flood's 40 jobs started after the quiet turn: it waited for a free slot, not for the backlog`,
    );
    await cancelAll(noisy.tenants);
  },
);

t.test('two accounts that both wait share by the weights of their plans (free 1, pro 4)', async (t) => {
  const free = await createAccount(db, 1, 'free');
  const pro = await createAccount(db, 1, 'pro');
  // Both backlogs are queued before the one slot starts anything.
  await db.transaction((tx) => enqueueJobs(tx, waits(free.tenants[0]!, 12, 20)));
  await db.transaction((tx) => enqueueJobs(tx, waits(pro.tenants[0]!, 12, 20)));
  await startTestWorker(t, databaseUrl, { WORKER_IO_CONCURRENCY: '1' });
  const tenants = [free.tenants[0]!, pro.tenants[0]!];
  await waitFor(
    'both backlogs to finish',
    async () => (await jobsOf(tenants)).every((j) => j.status === 'succeeded'),
    60_000,
  );
  const order = (await jobsOf(tenants)).map((j) => (j.tenant_id === pro.tenants[0] ? 'P' : 'F')).join('');
  const firstTen = order.slice(0, 10);
  const pros = [...firstTen].filter((c) => c === 'P').length;
  t.ok(pros >= 7, `of the first ten starts, ${pros} were the Pro account's (order ${order})`);
  t.ok(firstTen.includes('F'), 'and the free account was not starved');
});
