// No job outlives its workspace, without a lock on the workspace's row at
// each enqueue (migration 0053): an enqueue holds the workspace against
// deletion until it commits, and a deletion removes the workspace's jobs.
import t from 'tap';
import { z } from 'zod';
import { sql, type DatabasePool } from '../../../core/db/pool.ts';
import { deleteAccount } from '../../../core/accounts/users.ts';
import { enqueueJob } from '../../../core/jobs/enqueue.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createAccount } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);

const Count = z.object({ n: z.number() });
const jobsOf = (tenantId: string) =>
  db.oneFirst(sql.type(Count)`select count(*)::int as n from jobs where tenant_id = ${tenantId}`);
const openCount = (accountId: string) => db.oneFirst(sql.type(Count)`select account_open_count(${accountId}) as n`);
const graphileJobs = () => db.oneFirst(sql.type(Count)`select count(*)::int as n from graphile_worker.jobs`);

/** Resolves once a backend of this database waits for an advisory lock. */
async function someoneWaitsForTheWorkspace(pool: DatabasePool): Promise<void> {
  for (;;) {
    const waiting = await pool.oneFirst(sql.type(Count)`
      select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`);
    if (waiting > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

t.test("a workspace's deletion takes its jobs and counts the unfinished ones out of its account", async (t) => {
  const account = await createAccount(db, 2);
  const [gone, kept] = account.tenants as [string, string];
  for (const tenantId of [gone, gone, kept]) await enqueueJob(db, { kind: 'diag.noop', tenantId, quota: true });
  t.equal(await openCount(account.userId), 3);
  await db.query(sql.unsafe`delete from tenants where id = ${gone}`);
  t.equal(await jobsOf(gone), 0, 'its jobs are gone');
  t.equal(await jobsOf(kept), 1, "the other workspace's job stays");
  t.equal(await openCount(account.userId), 1, 'the account counts only what is left');
});

t.test('a job for a workspace that does not exist is refused and writes nothing', async (t) => {
  const before = await graphileJobs();
  await t.rejects(
    db.transaction((tx) => enqueueJob(tx, { kind: 'diag.noop', tenantId: '00000000-0000-7000-8000-000000000000' })),
    /foreign key/,
  );
  t.equal(await graphileJobs(), before, 'no wake-up either');
});

t.test('a deletion waits for an enqueue in flight, and takes the new job too', async (t) => {
  const account = await createAccount(db, 1);
  const tenantId = account.tenants[0]!;
  let commit!: () => void;
  const committed = new Promise<void>((resolve) => {
    commit = resolve;
  });
  let enqueued!: () => void;
  const inFlight = new Promise<void>((resolve) => {
    enqueued = resolve;
  });
  const enqueue = db.transaction(async (tx) => {
    await enqueueJob(tx, { kind: 'diag.noop', tenantId, quota: true });
    enqueued();
    await committed;
  });
  await inFlight;
  const deletion = db.query(sql.unsafe`delete from tenants where id = ${tenantId}`);
  await someoneWaitsForTheWorkspace(db);
  commit();
  await enqueue;
  await deletion;
  t.equal(await jobsOf(tenantId), 0, 'no job outlives its workspace');
  t.equal(await openCount(account.userId), 0, 'and the account counts none');
});

t.test('an enqueue that meets a deletion in flight waits for it, then is refused', async (t) => {
  const account = await createAccount(db, 1);
  const tenantId = account.tenants[0]!;
  const before = await graphileJobs();
  let commit!: () => void;
  const committed = new Promise<void>((resolve) => {
    commit = resolve;
  });
  let deleted!: () => void;
  const inFlight = new Promise<void>((resolve) => {
    deleted = resolve;
  });
  const deletion = db.transaction(async (tx) => {
    await tx.query(sql.unsafe`delete from tenants where id = ${tenantId}`);
    deleted();
    await committed;
  });
  await inFlight;
  const enqueue = db.transaction((tx) => enqueueJob(tx, { kind: 'diag.noop', tenantId }));
  await someoneWaitsForTheWorkspace(db);
  commit();
  await deletion;
  await t.rejects(enqueue, /foreign key/);
  t.equal(await jobsOf(tenantId), 0);
  t.equal(await graphileJobs(), before, 'no wake-up left behind');
});

t.test(
  "an enqueue that then writes a row naming its workspace does not deadlock with the account's deletion",
  async (t) => {
    const account = await createAccount(db, 1);
    const tenantId = account.tenants[0]!;
    let goOn!: () => void;
    const proceed = new Promise<void>((resolve) => {
      goOn = resolve;
    });
    let enqueued!: () => void;
    const inFlight = new Promise<void>((resolve) => {
      enqueued = resolve;
    });
    const request = db.transaction(async (tx) => {
      await enqueueJob(tx, { kind: 'diag.noop', tenantId });
      enqueued();
      await proceed;
      // A foreign key to the workspace's row, checked while the deletion waits.
      await tx.query(
        sql.unsafe`insert into chat_sessions (tenant_id, created_by) values (${tenantId}, ${account.userId})`,
      );
    }, 0); // neither is retried: a deadlock fails one of them
    await inFlight;
    const deletion = db.transaction((tx) => deleteAccount(tx, account.userId), 0);
    await someoneWaitsForTheWorkspace(db);
    goOn();
    await request;
    t.same(await deletion, { deletedTenants: 1 });
    t.equal(await jobsOf(tenantId), 0, 'the job went with its workspace');
  },
);
