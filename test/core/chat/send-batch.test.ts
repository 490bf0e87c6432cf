// The chat send's batch path writes the message (which carries the send's
// Idempotency-Key) and the turn job in one statement. A batch whose statement fails is retried
// send by send: the good sends land once each, and replaying their keys
// answers the same job, with nothing written twice.
import t from 'tap';
import { z } from 'zod';
import { sendBatch, type SendInput, type SendOutcome } from '../../../core/chat/send.ts';
import { createChatSession } from '../../../core/chat/sessions.ts';
import { sql, type DatabaseTransactionConnection } from '../../../core/db/pool.ts';
import { GroupCommitter } from '../../../core/jobs/group-commit.ts';
import { testLogger } from '../../helpers/config.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';
import { createMember } from '../../helpers/fixtures.ts';

const databaseUrl = await createTestDatabase(t);
const db = await testPool(t, databaseUrl);
const member = await createMember(db);
const session = await createChatSession(db, member.tenantId, member.userId, { title: 'Batch' });
const input = (key: string, message: string): SendInput => ({
  tenantId: member.tenantId,
  userId: member.userId,
  idempotencyKey: key,
  sessionId: session.id,
  message,
  attachments: [],
});
const counts = () =>
  db.one(sql.type(
    z.object({ messages: z.number(), records: z.number(), jobs: z.number(), graphile: z.number(), events: z.number() }),
  )`
    select (select count(*) from chat_messages)::int as messages,
      -- A send's key is a column of its message (0033); no idempotency_records row.
      (select count(*) from chat_messages where idempotency_key is not null)::int
        + (select count(*) from idempotency_records where scope = 'chat.send')::int as records,
      (select count(*) from jobs where kind = 'chat.turn')::int as jobs,
      (select count(*) from graphile_worker.jobs where task_identifier = 'chat.turn')::int as graphile,
      (select count(*) from session_job_events)::int as events`);

t.test(
  'a batch that fails halfway: each good send once, the bad one alone fails, replays answer the same jobs',
  async (t) => {
    // One in flight: the first send goes alone, the next five share a batch.
    const committer = new GroupCommitter(db, { maxInFlight: 1, logger: testLogger('group-commit') });
    const submit = (i: SendInput) => committer.submitBatched(sendBatch, i).then((r) => r.value as SendOutcome);
    // PostgreSQL refuses NUL in text: the statement of the batch holding it fails as a whole.
    const inputs = [
      input('key-first', 'first'),
      input('key-a', 'a'),
      input('key-b', 'b'),
      input('key-bad', 'bad \u0000 text'),
      input('key-c', 'c'),
      input('key-d', 'd'),
    ];
    const outcomes = await Promise.allSettled(inputs.map(submit));
    t.equal(outcomes[3]!.status, 'rejected', 'the bad send fails');
    const accepted = outcomes.flatMap((o, i) => (i === 3 ? [] : [o]));
    t.ok(
      accepted.every((o) => o.status === 'fulfilled' && o.value.kind === 'accepted'),
      'every good send is accepted',
    );
    t.same(
      await counts(),
      { messages: 5, records: 5, jobs: 5, graphile: 1, events: 0 },
      'one keyed message and job each, one wake-up for their session; no event row (queued comes from the job)',
    );

    const replays = await Promise.all(inputs.filter((_, i) => i !== 3).map(submit));
    t.ok(
      replays.every((r) => r.kind === 'replayed'),
      'replaying the keys',
    );
    t.same(
      replays.map((r) => (r as { body: { jobId: string } }).body.jobId),
      accepted.map((o) => ((o as PromiseFulfilledResult<SendOutcome>).value as { body: { jobId: string } }).body.jobId),
      'answers the jobs first accepted',
    );
    t.same(await counts(), { messages: 5, records: 5, jobs: 5, graphile: 1, events: 0 }, 'and writes nothing');
    const bad = await submit(input('key-bad', 'now without the byte'));
    t.equal(bad.kind, 'accepted', 'the failed send spent no key');
  },
);

/** A new tenant (free plan: 200 messages a month) with a session and `used` user messages this month. */
async function tenantAt(used: number, title: string) {
  const tenant = await createMember(db);
  const own = await createChatSession(db, tenant.tenantId, tenant.userId, { title });
  await db.query(sql.unsafe`
    insert into chat_messages (tenant_id, session_id, role, content)
    select ${tenant.tenantId}, ${own.id}, 'user', 'old' from generate_series(1, ${used})`);
  const send = (key: string, message = key): SendInput => ({
    tenantId: tenant.tenantId,
    userId: tenant.userId,
    idempotencyKey: key,
    sessionId: own.id,
    message,
    attachments: [],
  });
  return { tenant, own, send };
}

t.test(
  'the batch runs without a transaction block: one statement per batch, and a refused send writes nothing',
  async (t) => {
    const { send } = await tenantAt(199, 'Quota');
    const before = await counts();
    const outcomes = await sendBatch(
      db as never,
      [send('q-1', 'fits'), send('q-2', 'over'), send('q-1', 'fits'), send('q-3', 'over too')],
      false,
    );
    t.same(
      outcomes.map((o) => (o.value as SendOutcome).kind),
      ['accepted', 'refused', 'replayed', 'refused'],
      'the first fits; its repeat in the batch replays it',
    );
    t.match(outcomes[1]!.value, {
      refusal: { code: 'MESSAGE_LIMIT_REACHED', message: /free plan includes 200 messages/ },
    });
    const after = await counts();
    t.same(
      { ...after, messages: after.messages - 1 },
      { ...before, records: before.records + 1, jobs: before.jobs + 1, graphile: before.graphile + 1 },
      'one keyed message and job',
    );
  },
);

t.test(
  'two api processes racing at the limit: the counter row decides, exactly the room left is accepted',
  async (t) => {
    const { tenant, send } = await tenantAt(190, 'Race');
    // Two committers stand for two api processes: their batches run at the same time.
    const committers = [new GroupCommitter(db), new GroupCommitter(db)];
    const sends = Array.from({ length: 40 }, (_, n) =>
      committers[n % 2]!.submitBatched(sendBatch, send(`race-${n}`)).then((r) => (r.value as SendOutcome).kind),
    );
    const kinds = await Promise.all(sends);
    t.equal(kinds.filter((k) => k === 'accepted').length, 10, '10 of 40 accepted');
    t.equal(kinds.filter((k) => k === 'refused').length, 30, 'the rest refused');
    t.equal(
      await db.oneFirst(
        sql.type(
          z.object({ messages: z.number() }),
        )`select messages from tenant_message_counts where tenant_id = ${tenant.tenantId}`,
      ),
      200,
    );
  },
);

t.test(
  'credits: a paid model needs credits or the tenant’s own key; built-in and Ollama models need neither',
  async (t) => {
    const tenant = await createMember(db);
    await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${tenant.tenantId}`);
    const sessionWith = async (model: string) =>
      await db.oneFirst(sql.type(z.object({ id: z.string() }))`
    insert into chat_sessions (tenant_id, title, model, created_by) values (${tenant.tenantId}, 'Model', ${model}, ${tenant.userId}) returning id`);
    const [paid, offline, local] = [
      await sessionWith('openai/gpt-4o-mini'),
      await sessionWith('builtin/echo'),
      await sessionWith('ollama/llama3'),
    ];
    let n = 0;
    const kindOf = async (sessionId: string) => {
      const [outcome] = await sendBatch(
        db as never,
        [
          {
            tenantId: tenant.tenantId,
            userId: tenant.userId,
            idempotencyKey: `credit-${++n}`,
            sessionId,
            message: 'hi',
            attachments: [],
          },
        ],
        false,
      );
      const value = outcome!.value as SendOutcome;
      return value.kind === 'refused' ? value.refusal.code : value.kind;
    };
    t.equal(await kindOf(paid), 'CREDITS_DEPLETED', 'no credits, no key');
    t.equal(await kindOf(offline), 'accepted', 'the built-in model');
    t.equal(await kindOf(local), 'accepted', 'a local Ollama model');
    await db.query(sql.unsafe`insert into tenant_credits (tenant_id, balance_micros) values (${tenant.tenantId}, 5)`);
    t.equal(await kindOf(paid), 'accepted', 'with credits');
    await db.query(sql.unsafe`update tenant_credits set balance_micros = 0 where tenant_id = ${tenant.tenantId}`);
    await db.query(
      sql.unsafe`insert into provider_keys (tenant_id, provider, key_id, ciphertext, last4) values (${tenant.tenantId}, 'openai', 'k', 'x', '1234')`,
    );
    t.equal(await kindOf(paid), 'accepted', "with the tenant's own key");
    await db.query(sql.unsafe`delete from provider_keys where tenant_id = ${tenant.tenantId}`);
    t.equal(await kindOf(paid), 'CREDITS_DEPLETED', 'the key removed');

    // The workers said the platform holds no OpenAI key: credits could not pay for it either.
    await db.query(sql.unsafe`insert into platform_provider_keys (provider, configured) values ('openai', false)
    on conflict (provider) do update set configured = false`);
    t.teardown(() => db.query(sql.unsafe`delete from platform_provider_keys`));
    await db.query(sql.unsafe`update tenant_credits set balance_micros = 1000000 where tenant_id = ${tenant.tenantId}`);
    const before = await db.oneFirst(
      sql.type(z.object({ n: z.number() }))`select count(*)::int as n from jobs where tenant_id = ${tenant.tenantId}`,
    );
    t.equal(await kindOf(paid), 'PROVIDER_KEY_MISSING', 'no key anywhere: refused at once, credits or not');
    t.equal(
      await db.oneFirst(
        sql.type(z.object({ n: z.number() }))`select count(*)::int as n from jobs where tenant_id = ${tenant.tenantId}`,
      ),
      before,
      'nothing queued',
    );
    t.equal(await kindOf(offline), 'accepted', 'the built-in model still');
    await db.query(
      sql.unsafe`insert into provider_keys (tenant_id, provider, key_id, ciphertext, last4) values (${tenant.tenantId}, 'openai', 'k', 'x', '1234')`,
    );
    t.equal(await kindOf(paid), 'accepted', "the tenant's own key serves it");
  },
);

t.test('a worker writes which providers the platform holds a key for', async (t) => {
  const { recordPlatformProviderKeys } = await import('../../../core/provider-keys/platform.ts');
  const { testConfig } = await import('../../helpers/config.ts');
  await recordPlatformProviderKeys(db, testConfig(databaseUrl, { PLATFORM_ANTHROPIC_API_KEY: 'sk-ant-platform' }));
  t.teardown(() => db.query(sql.unsafe`delete from platform_provider_keys`));
  const rows = await db.any(
    sql.type(
      z.object({ provider: z.string(), configured: z.boolean() }),
    )`select provider, configured from platform_provider_keys order by provider`,
  );
  t.same(
    rows,
    [
      { provider: 'anthropic', configured: true },
      { provider: 'openai', configured: false },
      { provider: 'openrouter', configured: false },
    ],
    'Ollama needs no key and is not listed',
  );
});

t.test(
  'a send that read the count before a concurrent commit took the last room is refused, and writes nothing',
  async (t) => {
    const { tenant, own, send } = await tenantAt(199, 'Late');
    const before = await counts();
    // Another api process's send: its message is in, its counter row locked, not committed yet.
    const other = await uncommitted((tx) =>
      tx.query(
        sql.unsafe`insert into chat_messages (tenant_id, session_id, role, content) values (${tenant.tenantId}, ${own.id}, 'user', 'theirs')`,
      ),
    );
    // This send reads 199 (the other one is not committed), decides it fits, and waits on the counter row.
    const mine = sendBatch(db as never, [send('late-1', 'mine')], false);
    await sendWaitsOnLock();
    await other.commit();
    const [outcome] = await mine;
    t.match(
      outcome!.value,
      { kind: 'refused', refusal: { code: 'MESSAGE_LIMIT_REACHED' } },
      'decided again with the counter locked',
    );
    const after = await counts();
    t.same(after, { ...before, messages: before.messages + 1 }, 'only the other send is written');
    t.equal(
      await db.oneFirst(
        sql.type(
          z.object({ messages: z.number() }),
        )`select messages from tenant_message_counts where tenant_id = ${tenant.tenantId}`,
      ),
      200,
    );
  },
);

t.test(
  'a key another api process wrote after the statement began: the same send replays its 202, another send is a conflict',
  async (t) => {
    const { send } = await tenantAt(0, 'Same key');
    const before = await counts();
    // Another api process's batch, inside a transaction that has not committed yet.
    const other = await uncommitted(async (tx) =>
      (await sendBatch(tx as never, [send('same-1', 'hello'), send('same-2', 'hello')], true)).map(
        (o) => o.value as SendOutcome,
      ),
    );
    // These cannot see those messages; their inserts wait on the key's index entry.
    const mine = sendBatch(db as never, [send('same-1', 'hello'), send('same-2', 'something else')], false);
    await sendWaitsOnLock();
    const theirs = await other.commit();
    const [same, different] = (await mine).map((o) => o.value as SendOutcome);
    t.equal(theirs[0]!.kind, 'accepted');
    t.same(
      same,
      { kind: 'replayed', body: (theirs[0] as { body: unknown }).body },
      'the same send: the first one’s 202',
    );
    t.same(different, { kind: 'conflict' }, 'another send under the key: 409');
    t.same(
      await counts(),
      {
        ...before,
        messages: before.messages + 2,
        records: before.records + 2,
        jobs: before.jobs + 2,
        graphile: before.graphile + 1,
      },
      'only the first process’s two sends are written (one wake-up for their session)',
    );
  },
);

/** Runs `work` in a transaction and holds it open: `commit` lets it commit and returns what `work` returned. */
async function uncommitted<T>(
  work: (tx: DatabaseTransactionConnection) => Promise<T>,
): Promise<{ commit: () => Promise<T> }> {
  let release!: () => void;
  let ran!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const done = new Promise<void>((resolve) => (ran = resolve));
  const finished = db.transaction(async (tx) => {
    const value = await work(tx);
    ran();
    await held;
    return value;
  });
  await Promise.race([done, finished]);
  return {
    commit: () => {
      release();
      return finished;
    },
  };
}

/** Until a chat_send_round call waits on a lock another transaction holds. */
const sendWaitsOnLock = () =>
  waitFor(
    async () =>
      (await db.oneFirst(sql.type(z.object({ n: z.number() }))`
  select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%chat_send_round%'`)) ===
      1,
  );

async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('timed out waiting');
}
