// Invitation e-mails end to end: the api's invitation writes the outbox row
// and the team.invitation_email job (the answer carries no link: it goes
// only to the mailbox), a real worker sends it through a local SMTP server
// (smtp-server). Sent: the link and the workspace's name arrive, the sealed
// link leaves the table. A temporary refusal (451) is retried
// until the mail goes out; a permanent one (550) fails the job at once
// (smtp_refused); so does a worker without SMTP_URL (smtp_not_configured),
// and both clear the sealed link. An invitation revoked before the worker
// runs is not mailed. Without SMTP_URL nothing is queued. No log line
// carries a token.
import pino from 'pino';
import tap, { type Test } from 'tap';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { sql } from '../../../core/db/pool.ts';
import { PermanentJobError } from '../../../core/jobs/errors.ts';
import { sendInvitationEmail } from '../../../core/teams/mail.ts';
import { startWorker, type RunningWorker } from '../../../workers/worker.ts';
import { buildTestApp } from '../../helpers/app.ts';
import { testConfig } from '../../helpers/config.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { createMember, type Member } from '../../helpers/fixtures.ts';
import { captureLog } from '../../helpers/log-capture.ts';
import { startSmtpServer } from '../../helpers/smtp-server.ts';
import { waitFor } from '../../helpers/wait.ts';

const WORKSPACE = 'Northwind Labs';
const MAIL_FROM = 'Invitations <invites@example.test>';

// later-…: refused with 451 on its first RCPT TO, accepted after; never-…: always 550.
const smtp = await startSmtpServer(tap, (address, n) => {
  if (address.startsWith('later-') && n === 1) return 451;
  if (address.startsWith('never-')) return 550;
  return null;
});
const databaseUrl = await createTestDatabase(tap);
const overrides = { SMTP_URL: smtp.url, MAIL_FROM, LOG_LEVEL: 'debug' };
const api = await buildTestApp(tap, databaseUrl, overrides);
const { app, db } = api;
// Without SMTP: the same database, no e-mails.
const plain = await buildTestApp(tap, databaseUrl, { LOG_LEVEL: 'debug' });

// The worker logs everything it says, unredacted, for the token check at the end.
const workerLog = captureLog();
let worker: RunningWorker | null = null;
async function ensureWorker(): Promise<void> {
  if (worker) return;
  const started = await startWorker({
    config: testConfig(databaseUrl, overrides),
    databaseUrl,
    logger: pino({ level: 'debug' }, workerLog.stream),
  });
  worker = started;
  tap.teardown(() => started.stop());
}

/** Every token an answer handed out: none may appear in a log. */
const tokens: string[] = [];
const tokenOf = (link: string) => link.slice(link.indexOf('#') + 1);

async function workspace(): Promise<Member & { headers: Record<string, string> }> {
  const member = await createMember(db, 'admin');
  await db.query(sql.unsafe`update tenants set name = ${WORKSPACE} where id = ${member.tenantId}`);
  return { ...member, headers: { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId } };
}

type Created = {
  id: string;
  email: string;
  link: string | null;
  emailed: boolean;
  message: string;
  emailStatus: string;
};

async function invite(t: Test, w: { headers: Record<string, string> }, email: string, via = app): Promise<Created> {
  const res = await via.inject({
    method: 'POST',
    url: '/api/tenants/invitations',
    headers: w.headers,
    payload: { email, role: 'member' },
  });
  // The body carries the token: shown only when something is wrong.
  t.equal(res.statusCode, 201, res.statusCode === 201 ? `invited ${email}` : res.body);
  const created = res.json() as Created;
  if (created.emailed) {
    t.equal(created.link, null, 'e-mailed: the answer carries no link');
    return created;
  }
  const token = tokenOf(created.link!);
  t.match(token, /^inv_[\w-]{20,}$/, 'the link carries the token in its fragment');
  tokens.push(token);
  return created;
}

/** The link an e-mail carries (its token joins those no log may show). */
function linkIn(text: string): string {
  const link = /http:\/\/\S+\/invitations\/accept#inv_[\w-]{20,}/.exec(text)?.[0] ?? '';
  if (link) tokens.push(tokenOf(link));
  return link;
}

const JobState = z.object({
  id: z.string(),
  status: z.string(),
  attempts: z.number(),
  code: z.string().nullable(),
  outcome: z.string().nullable(),
});
const jobOf = (tenantId: string) =>
  db.maybeOne(sql.type(JobState)`
    select id, status, attempts, error->>'code' as code, result->>'outcome' as outcome
    from jobs where tenant_id = ${tenantId} and kind = 'team.invitation_email'`);
const jobCount = (tenantId: string) =>
  db.oneFirst(
    sql.type(
      z.object({ n: z.number() }),
    )`select count(*)::int as n from jobs where tenant_id = ${tenantId} and kind = 'team.invitation_email'`,
  );
async function finishedJob(tenantId: string, timeoutMs = 30_000) {
  return waitFor(
    `the invitation e-mail job of ${tenantId} to finish`,
    async () => {
      const job = await jobOf(tenantId);
      return job && ['succeeded', 'failed', 'cancelled'].includes(job.status) ? job : null;
    },
    timeoutMs,
  );
}

const Outbox = z.object({
  status: z.string(),
  sealed_link: z.string().nullable(),
  attempts: z.number(),
  last_error: z.string().nullable(),
  sent: z.boolean(),
});
const outboxOf = (invitationId: string) =>
  db.any(sql.type(Outbox)`
    select status, sealed_link, attempts, last_error, sent_at is not null as sent from invitation_emails where invitation_id = ${invitationId}`);

async function listed(t: Test, w: { headers: Record<string, string> }, invitationId: string) {
  const res = await app.inject({ url: '/api/tenants/invitations', headers: w.headers });
  t.equal(res.statusCode, 200, res.statusCode === 200 ? 'listed' : res.body);
  return (res.json().items as { id: string; emailStatus: string }[]).find((i) => i.id === invitationId);
}

tap.test('a worker without SMTP_URL gives the e-mail up: failed, the sealed link gone', async (t) => {
  // The api has SMTP_URL, the worker not (a deployment whose processes disagree).
  const w = await workspace();
  const created = await invite(t, w, 'unconfigured@example.test');
  const emailId = await db.oneFirst(
    sql.type(z.object({ id: z.string() }))`select id from invitation_emails where invitation_id = ${created.id}`,
  );
  const settings = { ...api.config.teams, smtpUrl: null };
  const error = await sendInvitationEmail(emailId, {
    db,
    keyring: Keyring.fromConfig(api.config),
    settings,
    attempt: 1,
    maxAttempts: 8,
  }).catch((e: unknown) => e);
  t.ok(error instanceof PermanentJobError, 'a permanent failure');
  t.equal((error as PermanentJobError).code, 'smtp_not_configured');
  const rows = await outboxOf(created.id);
  t.same(
    rows.map(({ status, sealed_link, sent }) => ({ status, sealed_link, sent })),
    [{ status: 'failed', sealed_link: null, sent: false }],
    'given up: failed, the sealed link gone',
  );
  t.match(rows[0]?.last_error, /SMTP_URL/);
  t.equal((await listed(t, w, created.id))?.emailStatus, 'failed', 'the list does not say queued for ever');
  t.equal(smtp.tries('unconfigured@example.test'), 0);
});

tap.test('revoked before the worker runs: nothing is sent, the e-mail is cancelled', async (t) => {
  const w = await workspace();
  const email = 'revoked@example.test';
  const created = await invite(t, w, email);
  t.equal(created.emailed, true);
  const outbox = await outboxOf(created.id);
  t.same(
    outbox.map((r) => r.status),
    ['queued'],
  );
  const sealed = outbox[0]?.sealed_link ?? '';
  t.ok(sealed, 'the link waits sealed');
  t.notOk(sealed.includes('inv_'), 'the token is not readable in the outbox');
  t.equal((await jobOf(w.tenantId))?.status, 'queued', 'the job waits for a worker');

  const revoked = await app.inject({
    method: 'DELETE',
    url: `/api/tenants/invitations/${created.id}`,
    headers: w.headers,
  });
  t.equal(revoked.statusCode, 204, revoked.body);
  t.same(
    await outboxOf(created.id),
    [{ status: 'cancelled', sealed_link: null, attempts: 0, last_error: null, sent: false }],
    'cancelled at once',
  );

  await ensureWorker();
  const job = await finishedJob(w.tenantId);
  t.equal(job.status, 'succeeded', 'the job ends without sending');
  t.equal(job.outcome, 'not_sent');
  t.equal(smtp.tries(email), 0, 'the SMTP server never heard of the address');
  t.same(smtp.to(email), []);
  t.same(await outboxOf(created.id), [
    { status: 'cancelled', sealed_link: null, attempts: 0, last_error: null, sent: false },
  ]);
});

tap.test('sent: the link and the workspace arrive, the sealed link is gone', async (t) => {
  await ensureWorker();
  const w = await workspace();
  const email = 'ada@example.test';
  const created = await invite(t, w, email);
  t.equal(created.emailed, true);
  t.match(created.message, /sent by e-mail to ada@example\.test only/);

  const job = await finishedJob(w.tenantId);
  t.same(
    { status: job.status, attempts: job.attempts, outcome: job.outcome },
    { status: 'succeeded', attempts: 1, outcome: 'sent' },
  );
  const mails = smtp.to(email);
  t.equal(mails.length, 1, 'one message to the invited address');
  const [mail] = mails;
  if (!mail) return;
  t.same(mail.to, [email]);
  t.equal(mail.from, 'invites@example.test', 'sent from MAIL_FROM');
  t.ok(linkIn(mail.text), 'the body carries the link');
  t.ok(mail.text.includes(`workspace "${WORKSPACE}"`), 'the body names the workspace');
  t.match(mail.subject, /invited you to Northwind Labs$/, 'the subject names the workspace');

  t.same(await outboxOf(created.id), [
    { status: 'sent', sealed_link: null, attempts: 1, last_error: null, sent: true },
  ]);
  t.equal((await listed(t, w, created.id))?.emailStatus, 'sent');
});

tap.test('a temporary refusal (451) is retried until the mail goes out', async (t) => {
  await ensureWorker();
  const w = await workspace();
  const email = 'later-grace@example.test';
  const created = await invite(t, w, email);
  // The retry comes after the engine's backoff (e^1 s after the first attempt).
  const job = await finishedJob(w.tenantId, 60_000);
  t.same(
    { status: job.status, attempts: job.attempts, outcome: job.outcome },
    { status: 'succeeded', attempts: 2, outcome: 'sent' },
  );
  t.equal(smtp.tries(email), 2, 'refused once, accepted on the retry');
  const mails = smtp.to(email);
  t.equal(mails.length, 1);
  t.ok(linkIn(mails[0]?.text ?? ''), 'the retried mail carries the link');
  t.match(
    workerLog.text(),
    new RegExp(`"jobId":"${job.id}"[^\\n]*"code":"smtp_unavailable"[^\\n]*job attempt failed; retry in`),
    'the first attempt failed as retryable',
  );
  t.same(await outboxOf(created.id), [
    { status: 'sent', sealed_link: null, attempts: 2, last_error: null, sent: true },
  ]);
  t.equal((await listed(t, w, created.id))?.emailStatus, 'sent');
});

tap.test('a permanent refusal (550) fails the job at once: smtp_refused, nothing received', async (t) => {
  await ensureWorker();
  const w = await workspace();
  const email = 'never-bob@example.test';
  const created = await invite(t, w, email);
  const job = await finishedJob(w.tenantId);
  t.same(
    { status: job.status, attempts: job.attempts, code: job.code },
    { status: 'failed', attempts: 1, code: 'smtp_refused' },
  );
  t.equal(smtp.tries(email), 1, 'not retried');
  t.same(smtp.to(email), [], 'no message received');
  const rows = await outboxOf(created.id);
  t.same(
    rows.map(({ status, sealed_link, attempts, sent }) => ({ status, sealed_link, attempts, sent })),
    [{ status: 'failed', sealed_link: null, attempts: 1, sent: false }],
  );
  t.match(rows[0]?.last_error, /550/);
  t.equal((await listed(t, w, created.id))?.emailStatus, 'failed');
});

tap.test('without SMTP_URL: not e-mailed, no outbox row, no job', async (t) => {
  const w = await workspace();
  const email = 'nomail@example.test';
  const created = await invite(t, w, email, plain.app);
  t.equal(created.emailed, false);
  t.match(created.message, /not e-mailed/);
  t.equal(created.emailStatus, 'not_sent');
  t.same(await outboxOf(created.id), [], 'no invitation_emails row');
  t.equal(await jobCount(w.tenantId), 0, 'no job');
});

tap.test('no log line carries a token', async (t) => {
  t.equal(tokens.length, 3, 'the two mailed links and the one shown without SMTP');
  const logs = { api: api.logs(), plain: plain.logs(), worker: workerLog.text() };
  t.match(logs.api, /invitation created/, 'the api logged the invitations');
  t.match(logs.plain, /invitation created/);
  t.match(logs.worker, /invitation e-mail sent/, 'the worker logged its sends');
  for (const token of tokens) {
    for (const [name, text] of Object.entries(logs))
      t.notOk(text.includes(token), `the ${name} logs do not carry ${token.slice(0, 8)}…`);
  }
});
