import t from 'tap';
import { z } from 'zod';
import { sendBatch, type SendInput } from '../../../core/chat/send.ts';
import { fingerprint } from '../../../core/idempotency.ts';
import { migrate } from '../../../core/db/migrate.ts';
import { sql } from '../../../core/db/pool.ts';
import { testLogger } from '../../helpers/config.ts';
import { createDatabaseBefore, testPool } from '../../helpers/db.ts';

t.test('keys of sends made before 0033 answer the same after it', async (t) => {
  const url = await createDatabaseBefore(t, '0033');

  const db = await testPool(t, url);
  const ids = await db.one(sql.type(z.object({ tenant: z.string(), user: z.string(), session: z.string() }))`
    with tenant as (insert into tenants (name) values ('Upgraded') returning id),
      u as (insert into users (email) values ('upgrade@example.test') returning id),
      s as (insert into chat_sessions (tenant_id, title, created_by) select tenant.id, 'Before', u.id from tenant, u returning id)
    select tenant.id as tenant, u.id as user, s.id as session from tenant, u, s`);
  const send: SendInput = {
    tenantId: ids.tenant,
    userId: ids.user,
    idempotencyKey: 'sent-before-0033',
    sessionId: ids.session,
    message: 'Hello from before',
    attachments: [],
  };
  const print = fingerprint({ sessionId: send.sessionId, companyScope: null, message: send.message, attachments: [] });
  // What 0029's send wrote: the message, its job, and the key's record.
  const old = await db.one(sql.type(z.object({ message: z.string(), job: z.string() }))`
    with m as (insert into chat_messages (tenant_id, session_id, role, content, created_by)
        values (${ids.tenant}, ${ids.session}, 'user', ${send.message}, ${ids.user}) returning id),
      j as (insert into jobs (id, tenant_id, kind, session_id) values (gen_random_uuid(), ${ids.tenant}, 'chat.turn', ${ids.session}) returning id)
    select m.id as message, j.id as job from m, j`);
  await db.query(sql.unsafe`
    insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
    values ('chat.send', ${ids.tenant}, ${send.idempotencyKey}, ${print}, 'completed', 202,
      ${sql.jsonb({ jobId: old.job, messageId: old.message, sessionId: ids.session, status: 'queued' })})`);

  t.same((await migrate(url, testLogger())).applied.slice(0, 1), ['0033_chat_send_key_on_message.sql']);
  const moved = await db.one(sql.type(
    z.object({
      key: z.string().nullable(),
      fingerprint: z.string().nullable(),
      job: z.string().nullable(),
      records: z.number(),
    }),
  )`
    select idempotency_key as key, request_fingerprint as fingerprint, turn_job_id as job,
      (select count(*) from idempotency_records where scope = 'chat.send')::int as records
    from chat_messages where id = ${old.message}`);
  t.same(
    moved,
    { key: send.idempotencyKey, fingerprint: print, job: old.job, records: 0 },
    'the key is on its message, the record gone',
  );

  const [replay] = await sendBatch(db as never, [send], false);
  t.same(
    replay!.value,
    { kind: 'replayed', body: { jobId: old.job, messageId: old.message, sessionId: ids.session, status: 'queued' } },
    'the same 202 as before the upgrade',
  );
  const [other] = await sendBatch(db as never, [{ ...send, message: 'Something else' }], false);
  t.same(other!.value, { kind: 'conflict' }, 'the key with another message is a conflict');
  const messages = await db.oneFirst(
    sql.type(z.object({ n: z.number() }))`select count(*)::int as n from chat_messages`,
  );
  t.equal(messages, 1, 'nothing written twice');
});
