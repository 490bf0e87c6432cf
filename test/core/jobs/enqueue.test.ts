import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { enqueueJob, enqueueJobs } from '../../../core/jobs/enqueue.ts';
import { GroupCommitter } from '../../../core/jobs/group-commit.ts';
import { QueueLimitError } from '../../../core/jobs/quota.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createAccount, createMember } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);

const counts = () =>
  db.one(sql.type(z.object({ jobs: z.number(), graphile: z.number() }))`
    select (select count(*) from jobs)::int as jobs, (select count(*) from graphile_worker.jobs)::int as graphile`);

t.test('a committed enqueue writes the jobs row and the Graphile job together', async (t) => {
  const before = await counts();
  const job = await db.transaction((tx) =>
    enqueueJob(tx, { kind: 'diag.noop', tenantId: member.tenantId, input: { a: 1 } }),
  );
  t.equal(job.status, 'queued');
  const after = await counts();
  t.same(after, { jobs: before.jobs + 1, graphile: before.graphile + 1 });
  const row = await db.one(sql.type(z.object({ kind: z.string(), status: z.string(), tenant_id: z.string() }))`
    select kind, status, tenant_id from jobs where id = ${job.id}`);
  t.same(row, { kind: 'diag.noop', status: 'queued', tenant_id: member.tenantId });
});

t.test('a rolled-back transaction leaves neither a jobs row nor a Graphile job', async (t) => {
  const before = await counts();
  await t.rejects(
    db.transaction(async (tx) => {
      await enqueueJob(tx, { kind: 'diag.noop', tenantId: member.tenantId });
      throw new Error('the request failed after enqueueing');
    }),
    /the request failed/,
  );
  t.same(await counts(), before);
});

t.test('group commit: concurrent submissions commit together; a failing one rolls back alone', async (t) => {
  const committer = new GroupCommitter(db, { maxInFlight: 1 });
  const before = await counts();
  const marker = `gc-${Date.now()}`;
  const submissions = Array.from({ length: 20 }, (_, i) =>
    committer.submit({
      work: async (tx) => {
        await tx.query(sql.unsafe`insert into tenants (name, settings) values (${marker}, ${sql.jsonb({ i })})`);
        if (i === 7) throw new Error('request 7 is invalid');
        return i;
      },
      jobs: (i: number) => [{ kind: 'diag.noop', tenantId: member.tenantId, input: { i } }],
    }),
  );
  const results = await Promise.allSettled(submissions);
  const rejected = results.filter((r) => r.status === 'rejected');
  t.equal(rejected.length, 1, 'only the failing request is rejected');
  t.match((rejected[0] as PromiseRejectedResult).reason, /request 7 is invalid/);
  const fulfilled = results
    .filter((r) => r.status === 'fulfilled')
    .map((r) => (r as PromiseFulfilledResult<{ value: number; jobs: unknown[] }>).value);
  t.equal(fulfilled.length, 19);
  t.ok(fulfilled.every((f) => f.jobs.length === 1));
  t.same(await counts(), { jobs: before.jobs + 19, graphile: before.graphile + 19 });
  const rows = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from tenants where name = ${marker}`,
  );
  t.equal(rows, 19, "the failing request's own rows were rolled back");
});

t.test('group commit: a job spec that breaks the shared statement fails only its own request', async (t) => {
  const committer = new GroupCommitter(db, { maxInFlight: 1 });
  const before = await counts();
  const results = await Promise.allSettled([
    committer.enqueue([{ kind: 'diag.noop', tenantId: member.tenantId }]),
    committer.enqueue([{ kind: 'diag.noop', tenantId: '00000000-0000-0000-0000-000000000000' }]), // no such tenant
    committer.enqueue([{ kind: 'diag.noop', tenantId: member.tenantId }]),
  ]);
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  t.same(await counts(), { jobs: before.jobs + 2, graphile: before.graphile + 2 });
});

t.test(
  "work that counts against the account's limit: over it the enqueue is refused and writes nothing; platform follow-ups are never refused",
  async (t) => {
    const account = await createAccount(db, 1);
    const tenantId = account.tenants[0]!;
    await db.query(sql.unsafe`update plan_limits set max_open_jobs = 2 where plan = 'free'`);
    t.teardown(() => db.query(sql.unsafe`update plan_limits set max_open_jobs = 200 where plan = 'free'`));
    const committer = new GroupCommitter(db, { maxInFlight: 1 });
    await committer.enqueue([
      { kind: 'diag.noop', tenantId, quota: true },
      { kind: 'diag.noop', tenantId, quota: true },
    ]);
    const before = await counts();
    const refused = await committer
      .enqueue([{ kind: 'diag.noop', tenantId, quota: true }])
      .catch((error: unknown) => error);
    t.ok(refused instanceof QueueLimitError, 'QueueLimitError');
    t.match(refused, { code: 'QUEUE_LIMIT_REACHED', plan: 'free', limit: 2, open: 2 });
    t.same(await counts(), before, 'nothing written');
    await db.transaction((tx) => enqueueJob(tx, { kind: 'diag.noop', tenantId }));
    t.same(
      await counts(),
      { jobs: before.jobs + 1, graphile: before.graphile + 1 },
      'a follow-up without quota goes in',
    );
  },
);

t.test("fair order: each account's jobs are spaced by its weight, and a new account starts at the head", async (t) => {
  const [a, b] = [await createAccount(db, 1, 'free'), await createAccount(db, 1, 'enterprise')];
  const tags = async (tenantId: string, n: number) => {
    const jobs = await db.transaction((tx) =>
      enqueueJobs(
        tx,
        Array.from({ length: n }, () => ({ kind: 'diag.wait', tenantId })),
      ),
    );
    return db.anyFirst(sql.type(z.object({ t: z.number() }))`
      select extract(epoch from g.run_at)::float8 * 1e6 as t from jobs j join graphile_worker._private_jobs g on g.id = j.graphile_job_id
      where j.id = any(${sql.array(
        jobs.map((job) => job.id),
        'uuid',
      )}) order by g.run_at`);
  };
  const free = await tags(a.tenants[0]!, 4);
  const enterprise = await tags(b.tenants[0]!, 4);
  const steps = (xs: readonly number[]) => xs.slice(1).map((x, i) => Math.round(x - xs[i]!));
  t.same(steps(free), [16, 16, 16], 'free: 16 µs apart (weight 1)');
  t.same(steps(enterprise), [1, 1, 1], 'enterprise: 1 µs apart (weight 16)');
  t.ok(enterprise[0]! <= free[1]!, "the new account's first job is not behind the other's backlog");
});
