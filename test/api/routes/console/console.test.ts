// The operator console over HTTP: who may see it, its pages, its forms'
// CSRF tokens, each action with its audit row (in one transaction), live
// updates over its websocket, and secrets masked in payloads. The same
// pages in Chromium: test/browser/console.test.ts.
import t from 'tap';
import { createUser } from '../../../../core/accounts/users.ts';
import { sql } from '../../../../core/db/pool.ts';
import { enqueueJob } from '../../../../core/jobs/enqueue.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp, startTestServer } from '../../../helpers/app.ts';
import { ConsoleClient } from '../../../helpers/console.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { startTestWorker } from '../../../helpers/worker.ts';

const PASSWORD = 'correct horse battery staple';
const databaseUrl = await createTestDatabase(t);
const { db, url } = await startTestServer(t, databaseUrl);
await startTestWorker(t, databaseUrl);
await createUser(db, { email: 'op@example.test', password: PASSWORD, operator: true });
const pat = await createUser(db, { email: 'pat@example.test', password: PASSWORD });
const acme = await createTenant(db, pat.id, 'Acme Org');

const enqueue = (kind: string, input: Record<string, unknown>, maxAttempts?: number) =>
  db.transaction((tx) => enqueueJob(tx, { kind, tenantId: acme.id, input, ...(maxAttempts ? { maxAttempts } : {}) }));
const jobStatus = (id: string) =>
  db.one(sql.unsafe`select status, attempts from jobs where id = ${id}`) as Promise<{
    status: string;
    attempts: number;
  }>;

t.test('a visitor without a session gets the sign-in page and a strict cookie', async (t) => {
  const visitor = new ConsoleClient(url);
  const page = await visitor.get('/console/jobs');
  t.equal(page.status, 200);
  t.match(page.text, 'Operator console: sign in');
  t.notMatch(page.text, 'Acme Org');
  const cookie = page.headers.get('set-cookie') ?? '';
  t.match(cookie, /^console_session=/);
  t.match(cookie, /HttpOnly/);
  t.match(cookie, /SameSite=Strict/);
  t.match(cookie, /Path=\/console/);
  t.notMatch(cookie, /Secure/, 'not over plain http');
  t.notMatch(page.headers.get('content-security-policy') ?? '', /script-src/, 'the sign-in page runs no script');
  t.match(page.text, 'name="next" value="/console/jobs"', 'sign-in leads back to the page asked for');
});

t.test('served over https, the cookie is Secure', async (t) => {
  const { app } = await buildTestApp(t, databaseUrl, { BASE_URL: 'https://platform.example' });
  const page = await app.inject('/console');
  t.match(String(page.headers['set-cookie']), /HttpOnly; SameSite=Strict; Secure/);
});

t.test('a signed-in person who is not an operator gets 403 and nothing of the platform', async (t) => {
  const person = new ConsoleClient(url);
  const signedIn = await person.signIn('pat@example.test', PASSWORD);
  t.equal(signedIn.status, 303);
  for (const path of [
    '/console',
    '/console/jobs',
    '/console/workers',
    '/console/tenants',
    '/console/audit',
    `/console/tenants/${acme.id}`,
  ]) {
    const page = await person.get(path);
    t.equal(page.status, 403, path);
    t.match(page.text, 'Only the platform operator may use the console');
    t.notMatch(page.text, 'Acme Org', `${path} shows no tenant`);
  }
  const csrf = ConsoleClient.csrfOf((await person.get('/console')).text);
  const suspend = await person.post(`/console/tenants/${acme.id}/suspend`, { csrf, reason: 'no' });
  t.equal(suspend.status, 403);
  t.equal(
    (await db.oneFirst(
      sql.unsafe`select suspended_at is null as active from tenants where id = ${acme.id}`,
    )) as boolean,
    true,
  );
  await t.rejects(person.live(), /upgrade refused: 403/);
});

t.test('a wrong password is refused; sign-in budget and CSRF are checked', async (t) => {
  const person = new ConsoleClient(url);
  const page = await person.get('/console');
  const wrong = await person.post('/console/sign-in', {
    csrf: ConsoleClient.csrfOf(page.text),
    email: 'op@example.test',
    password: 'nope',
  });
  t.equal(wrong.status, 401);
  t.match(wrong.text, 'E-mail or password is wrong.');
  const forged = await person.post('/console/sign-in', {
    csrf: 'forged',
    email: 'op@example.test',
    password: PASSWORD,
  });
  t.equal(forged.status, 403);
  t.match(forged.text, 'Form expired');
  const outside = await person.post('/console/sign-in', {
    csrf: ConsoleClient.csrfOf(page.text),
    email: 'op@example.test',
    password: PASSWORD,
    next: 'https://evil.example/',
  });
  t.equal(outside.location, '/console', 'never leads off the console');
});

const operator = new ConsoleClient(url);

t.test('an operator sees every page', async (t) => {
  t.equal((await operator.signIn('op@example.test', PASSWORD)).status, 303);
  const job = await enqueue('diag.noop', {});
  await waitFor('the job finished', async () => (await jobStatus(job.id)).status === 'succeeded');
  const pages: Array<[string, RegExp]> = [
    ['/console', /By job kind[\s\S]*diag\.noop/],
    ['/console/jobs', new RegExp(job.id.slice(0, 8))],
    ['/console/jobs?state=succeeded&kind=diag.noop', new RegExp(job.id.slice(0, 8))],
    [`/console/jobs?tenant=${acme.id}&from=2000-01-01`, new RegExp(job.id.slice(0, 8))],
    [`/console/jobs/${job.id}`, /succeeded[\s\S]*Timeline/],
    ['/console/workers', /<table id="workers">[\s\S]*\d+ \/ \d+/],
    ['/console/schedules', /Next run[\s\S]*sweep_expired_rows/],
    ['/console/tenants', /Acme Org/],
    ['/console/tenants?search=acme', /Acme Org/],
    [
      `/console/tenants/${acme.id}`,
      /Acme Org[\s\S]*<table id="members"[\s\S]*pat@example\.test[\s\S]*Admin \(owner\)[\s\S]*Recent jobs/,
    ],
    ['/console/audit', /No operator action has been taken yet/],
  ];
  for (const [path, expected] of pages) {
    const page = await operator.get(path);
    t.equal(page.status, 200, path);
    t.match(page.text, expected, path);
    if (!path.endsWith('/audit')) t.match(page.text, 'UTC', `${path} says its times are UTC`);
  }
  const csp = (await operator.get('/console')).headers.get('content-security-policy') ?? '';
  t.match(
    csp,
    /default-src 'none'; style-src 'nonce-([^']+)'; script-src 'nonce-\1'; connect-src 'self'/,
    'only our nonce-tagged script, talking to us only',
  );
  const script = await operator.get('/console/console.js');
  t.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.match((await operator.get('/console/jobs?state=failed')).text, 'No job matches');
  t.match((await operator.get('/console/jobs?tenant=not-a-uuid')).text, 'Ignored filters that were not valid: tenant');
  t.equal((await operator.get('/console/jobs/00000000-0000-4000-8000-000000000000')).status, 404);
  t.equal((await operator.get('/console/jobs/nope')).status, 404);
  t.equal((await operator.get('/console/tenants/00000000-0000-4000-8000-000000000000')).status, 404);
});

t.test('the job list pages by keyset', async (t) => {
  for (let i = 0; i < 55; i++) await enqueue('diag.noop', { i });
  const first = await operator.get('/console/jobs?kind=diag.noop');
  const next = /rel="next" href="([^"]+)"/.exec(first.text);
  t.ok(next, 'a link to older jobs');
  const second = await operator.get(next![1]!.replace(/&amp;/g, '&'));
  t.equal(second.status, 200);
  const ids = (text: string) => [...text.matchAll(/data-job="([^"]+)"/g)].map((m) => m[1]);
  const a = ids(first.text);
  const b = ids(second.text);
  t.equal(a.length, 50);
  t.ok(b.length >= 6);
  t.same(
    a.filter((id) => b.includes(id)),
    [],
    'no job on both pages',
  );
});

t.test('retry a failed job: it runs again and succeeds; the audit says who, when and why', async (t) => {
  const job = await enqueue('diag.steps', { steps: 1, delayMs: 0, failAttemptsBelow: 2 }, 1);
  await waitFor('the job failed', async () => (await jobStatus(job.id)).status === 'failed');
  const page = await operator.get(`/console/jobs/${job.id}`);
  t.match(page.text, 'diag_transient');
  t.match(page.text, 'Retry this job');
  const noReason = await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/retry`, '  ');
  t.equal(noReason.status, 400);
  t.equal((await jobStatus(job.id)).status, 'failed', 'nothing happened without a reason');
  const forged = await operator.post(`/console/jobs/${job.id}/retry`, { csrf: 'x', reason: 'try' });
  t.equal(forged.status, 403);
  const retried = await operator.act(
    `/console/jobs/${job.id}`,
    `/console/jobs/${job.id}/retry`,
    'the provider was down',
  );
  t.equal(retried.status, 303);
  t.equal(retried.location, `/console/jobs/${job.id}`);
  await waitFor('the retried job succeeded', async () => (await jobStatus(job.id)).status === 'succeeded');
  t.equal((await jobStatus(job.id)).attempts, 2, 'numbered on from its failed attempt');
  const after = await operator.get(`/console/jobs/${job.id}`);
  t.match(
    after.text,
    /failed — <span class="state-failed">diag_transient/,
    "the timeline keeps the failed attempt's error",
  );
  t.match(after.text, /job\.retry[\s\S]*the provider was down[\s\S]*queued again as attempt 2/);
  const again = await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/retry`, 'once more');
  t.equal(again.status, 409, 'only a failed job can be retried');
  const audit = await operator.get('/console/audit');
  t.match(audit.text, /op@example\.test[\s\S]*job\.retry[\s\S]*the provider was down/);
  t.equal(
    Number(await db.oneFirst(sql.unsafe`select count(*) from operator_actions where job_id = ${job.id}`)),
    1,
    'the refused retry left no record',
  );
});

t.test('cancel a running job; a finished one cannot be cancelled', async (t) => {
  const job = await enqueue('diag.steps', { steps: 100, delayMs: 1_000 });
  await waitFor('the job runs', async () => (await jobStatus(job.id)).status === 'running');
  const cancelled = await operator.act(
    `/console/jobs/${job.id}`,
    `/console/jobs/${job.id}/cancel`,
    'stuck for a customer',
  );
  t.equal(cancelled.status, 303);
  await waitFor('the job was cancelled', async () => (await jobStatus(job.id)).status === 'cancelled');
  t.match(
    (await operator.get('/console/audit')).text,
    /job\.cancel[\s\S]*stuck for a customer[\s\S]*its worker was asked to stop it/,
  );
  const twice = await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/cancel`, 'again');
  t.equal(twice.status, 409);
});

t.test('suspend and resume a tenant', async (t) => {
  const suspended = await operator.act(
    `/console/tenants/${acme.id}`,
    `/console/tenants/${acme.id}/suspend`,
    'payment fraud review',
  );
  t.equal(suspended.status, 303);
  const row = (await db.one(sql.unsafe`select suspended_at, suspended_reason from tenants where id = ${acme.id}`)) as {
    suspended_at: string | null;
    suspended_reason: string;
  };
  t.ok(row.suspended_at);
  t.equal(row.suspended_reason, 'operator op@example.test: payment fraud review');
  t.match((await operator.get(`/console/tenants/${acme.id}`)).text, /suspended[\s\S]*Resume this tenant/);
  t.equal(
    (await operator.act(`/console/tenants/${acme.id}`, `/console/tenants/${acme.id}/suspend`, 'again')).status,
    409,
    'the page offers resume now; a stale suspend form is refused',
  );
  t.equal(
    (await operator.act(`/console/tenants/${acme.id}`, `/console/tenants/${acme.id}/resume`, 'cleared')).status,
    303,
  );
  t.equal(await db.oneFirst(sql.unsafe`select suspended_at from tenants where id = ${acme.id}`), null);
  const audit = await operator.get(`/console/tenants/${acme.id}`);
  t.match(audit.text, /tenant\.resume[\s\S]*cleared[\s\S]*tenant\.suspend[\s\S]*payment fraud review/);
});

t.test('payloads show with secret-sounding fields masked', async (t) => {
  const job = await enqueue('diag.wait', {
    ms: 60_000,
    apiKey: 'sk-very-secret',
    nested: { refresh_token: 'rt-secret', note: 'visible' },
  });
  const page = await operator.get(`/console/jobs/${job.id}`);
  t.notMatch(page.text, 'sk-very-secret');
  t.notMatch(page.text, 'rt-secret');
  t.match(page.text, 'visible');
  t.match(page.text, '(masked)');
  await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/cancel`, 'test over');
});

t.test('the live socket: only from the console origin, and it sends a page again when a job changes', async (t) => {
  const anonymous = new ConsoleClient(url);
  await anonymous.get('/console');
  await t.rejects(anonymous.live(), /upgrade refused: 401/);
  await t.rejects(operator.live('https://evil.example'), /upgrade refused: 403/, 'cross-site socket refused');
  const { ws, next } = await operator.live();
  t.teardown(() => ws.close());
  ws.send(JSON.stringify({ type: 'watch', path: `/console/jobs?tenant=${acme.id}` }));
  await next((html) => html.includes('<table id="jobs">'));
  const job = await enqueue('diag.steps', { steps: 2, delayMs: 50 });
  await next((html) => new RegExp(`data-job="${job.id}"[\\s\\S]*?state-succeeded`).test(html));
  t.pass('the new job appeared and its end arrived without asking');
  const bad = await operator.live();
  bad.ws.send('not json');
  const closed = await new Promise<number>((resolve) => bad.ws.on('close', (code) => resolve(code)));
  t.equal(closed, 1008);
});

t.test('bad input gets a clear page, never a server error, and changes nothing', async (t) => {
  const job = await enqueue('diag.wait', { ms: 60_000 });
  const csrf = ConsoleClient.csrfOf((await operator.get(`/console/jobs/${job.id}`)).text);
  const cases: Array<[string, Promise<{ status: number; text: string }>]> = [
    ['a repeated query parameter', operator.get('/console/jobs?state=failed&state=queued')],
    ['an over-long id', operator.get(`/console/jobs/${'a'.repeat(100)}`)],
    ['a cursor that is not one', operator.get("/console/jobs?before=2026-01-01'|x")],
    ['an over-long reason', operator.post(`/console/jobs/${job.id}/cancel`, { csrf, reason: 'x'.repeat(501) })],
    [
      'an action on no such job',
      operator.post('/console/jobs/00000000-0000-4000-8000-000000000000/cancel', { csrf, reason: 'why' }),
    ],
    ['an action on a malformed id', operator.post('/console/jobs/nope/cancel', { csrf, reason: 'why' })],
  ];
  for (const [what, answer] of cases) {
    const { status, text } = await answer;
    t.ok(status >= 200 && status < 500, `${what}: ${status}`);
    t.match(text, /<!doctype html>/, `${what}: a page`);
  }
  t.equal(
    (await operator.get('/console/jobs/%E0%A4%A')).status,
    400,
    'a malformed escape: refused before any route (the platform error shape)',
  );
  const json = await fetch(`${url}/console/jobs/${job.id}/cancel`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: operator.cookie },
    body: JSON.stringify({ csrf, reason: 'json' }),
  });
  t.equal(json.status, 415, 'a JSON body is no form of the console');
  t.equal((await jobStatus(job.id)).status !== 'cancelled', true, 'nothing was cancelled by any of them');
  t.equal(Number(await db.oneFirst(sql.unsafe`select count(*) from operator_actions where job_id = ${job.id}`)), 0);
  await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/cancel`, 'test over');
});

t.test("a waiting job's page says until when it waits", async (t) => {
  const job = await enqueue('diag.steps', { steps: 1, delayMs: 0, failAttemptsBelow: 2, retryAfterMs: 120_000 }, 3);
  const until = await waitFor(
    'the job to wait for its retry',
    async () =>
      (await db.maybeOneFirst(
        sql.unsafe`select run_at from graphile_worker.jobs where key = ${`j:${job.id}`} and run_at > now()`,
      )) as string | null,
  );
  const page = await operator.get(`/console/jobs/${job.id}`);
  t.match(page.text, `waits until <time datetime="${new Date(until).toISOString()}">`, 'its wake time');
  await operator.act(`/console/jobs/${job.id}`, `/console/jobs/${job.id}/cancel`, 'test over');
});

t.test(
  'signing out ends the session on the server: the old cookie opens nothing, acts on nothing, and its live socket closes',
  async (t) => {
    const person = new ConsoleClient(url);
    t.equal((await person.signIn('op@example.test', PASSWORD)).status, 303);
    const copied = new ConsoleClient(url);
    copied.cookie = person.cookie; // the cookie as someone copied it
    t.equal((await copied.get('/console/tenants')).status, 200, 'the copy works while the session does');
    const csrf = ConsoleClient.csrfOf((await copied.get(`/console/tenants/${acme.id}`)).text);
    const { ws } = await copied.live();
    const closed = new Promise<[number, string]>((resolve) =>
      ws.on('close', (code, reason) => resolve([code, String(reason)])),
    );

    const page = await person.get('/console');
    const out = await person.post('/console/sign-out', {
      csrf: ConsoleClient.csrfOf(page.text.slice(page.text.indexOf('/console/sign-out'))),
    });
    t.equal(out.status, 303);

    const after = await copied.get('/console/tenants');
    t.equal(after.status, 200);
    t.match(after.text, 'Operator console: sign in', 'the old cookie gets the sign-in page');
    t.notMatch(after.text, 'Acme Org');
    const suspend = await copied.post(`/console/tenants/${acme.id}/suspend`, { csrf, reason: 'after sign-out' });
    t.not(suspend.status, 303, 'no action with the old cookie');
    t.equal(
      (await db.oneFirst(
        sql.unsafe`select suspended_at is null as active from tenants where id = ${acme.id}`,
      )) as boolean,
      true,
      'the tenant stays active',
    );
    t.same(await closed, [4401, 'signed out'], 'the live socket closes at its next check');
    await t.rejects(copied.live(), /upgrade refused: 401/, 'and cannot open again');
  },
);

t.test("Schedules: one table, each item with its last run, that run's outcome and its next run", async (t) => {
  await db.query(
    sql.unsafe`delete from scheduled_job_last_runs where identifier in ('maintenance.sweep_expired', 'usage_rollup')`,
  );
  await db.query(
    sql.unsafe`delete from scheduled_job_runs where identifier in ('maintenance.sweep_expired', 'usage_rollup')`,
  );
  // A run that found nothing to do (not recorded), and one that did something (recorded).
  await db.query(sql.unsafe`insert into scheduled_job_last_runs (identifier, task, scheduled_for, started_at) values
    ('maintenance.sweep_expired', 'maintenance.sweep_expired', '2026-11-27T05:17:00Z', '2026-11-27T05:17:00.2Z'),
    ('usage_rollup', 'usage.rollup', '2026-11-27T05:20:00Z', '2026-11-27T05:20:00.3Z')`);
  await db.query(sql.unsafe`insert into scheduled_job_runs (identifier, task, scheduled_for, started_at, finished_at, status, detail) values
    ('usage_rollup', 'usage.rollup', '2026-11-27T05:20:00Z', '2026-11-27T05:20:00.3Z', '2026-11-27T05:20:01.3Z', 'succeeded', '{"days":2}')`);
  const page = (await operator.get('/console/schedules')).text;
  const row = (id: string) => new RegExp(`<tr id="schedule-${id}">[\\s\\S]*?</tr>`).exec(page)?.[0] ?? '';
  t.match(
    row('sweep_expired_rows'),
    /2026-11-27 05:17[\s\S]*nothing to do[\s\S]*UTC/,
    'the last run, which did nothing, with the next',
  );
  t.match(row('usage_rollup'), /2026-11-27 05:20[\s\S]*state-succeeded[\s\S]*days/, 'the last run and what it did');
  t.match(row('memory_retention'), /not run yet/);
  t.match(page, /<table id="schedule-runs"[\s\S]*usage_rollup/, 'recorded runs below');
  t.notMatch(page, /No recorded run yet/);
});

t.test('the Jobs filter chooses a kind from a list of the kinds that exist', async (t) => {
  const page = (await operator.get('/console/jobs?kind=diag.noop')).text;
  t.match(page, /<select name="kind"><option value="">any kind<\/option>/);
  t.match(page, /<option value="diag\.noop" selected>diag\.noop<\/option>/);
  t.match(page, /<option value="chat\.turn">chat\.turn<\/option>/);
});

t.test('the overview charts the last hour from one sample a minute, as SVG drawn on the server', async (t) => {
  await db.query(sql.unsafe`delete from queue_samples`);
  t.match(
    (await operator.get('/console')).text,
    /id="no-samples"/,
    'before the first sample, the page says when charts start',
  );
  const { takeQueueSample } = await import('../../../../core/console/samples.ts');
  const minute = new Date(Math.floor(Date.now() / 60_000) * 60_000);
  t.same(await takeQueueSample(db, minute), { taken: true });
  t.same(await takeQueueSample(db, minute), { taken: false }, 'one sample per minute, however many workers fire');
  await db.query(sql.unsafe`insert into queue_samples (at, ready, running, waiting, oldest_ready_s, succeeded, failed)
    values (${new Date(minute.getTime() - 120_000).toISOString()}, 7, 2, 1, 4.5, 40, 3)`);
  const page = (await operator.get('/console')).text;
  const label = new Date(minute.getTime() - 120_000).toISOString().slice(11, 16);
  t.match(page, /<svg id="chart-finished" class="chart" viewBox="0 0 640 150" role="img"/);
  t.match(
    page,
    new RegExp(`<g data-minute="${label}" data-total="43"><title>${label} UTC: 40 succeeded, 3 failed</title>`),
  );
  t.match(
    page,
    new RegExp(`<g data-minute="${label}" data-total="10"><title>${label} UTC: 7 ready, 2 running, 1 waiting</title>`),
  );
  t.match(page, new RegExp(`<circle [^>]*data-minute="${label}"><title>${label} UTC: 4.5 s waiting</title>`));
  t.notMatch(
    page,
    /<script(?! nonce)|https?:\/\/(?!127\.0\.0\.1|localhost)[^"]*\.(js|css|woff)/,
    'nothing fetched from elsewhere',
  );
});

t.test('bulk retry: the failed jobs a filter matches, shown first, then retried together, each audited', async (t) => {
  const bulkCo = await createTenant(db, pat.id, 'Bulk Co');
  const failed: Array<{ id: string }> = [];
  for (let i = 0; i < 3; i++)
    failed.push(
      await db.transaction((tx) =>
        enqueueJob(tx, {
          kind: 'diag.steps',
          tenantId: bulkCo.id,
          input: { steps: 1, delayMs: 0, failAttemptsBelow: 2 },
          maxAttempts: 1,
        }),
      ),
    );
  await waitFor('the three failed', async () =>
    (await Promise.all(failed.map((j) => jobStatus(j.id)))).every((s) => s.status === 'failed'),
  );

  const list = (await operator.get(`/console/jobs?state=failed&tenant=${bulkCo.id}`)).text;
  t.match(
    list,
    /<form method="get" action="\/console\/jobs\/bulk" class="bulk"><input type="hidden" name="action" value="retry">/,
  );
  const preview = await operator.get(`/console/jobs/bulk?action=retry&state=failed&tenant=${bulkCo.id}`);
  t.equal(preview.status, 200);
  t.match(
    preview.text,
    /<strong>3<\/strong> jobs match \(tenant [0-9a-f]{8}\)\. Each is queued again as its next attempt/,
  );
  t.equal([...preview.text.matchAll(/<tr><td><a href="\/console\/jobs\//g)].length, 3, 'the jobs it would take');
  t.equal((await jobStatus(failed[0]!.id)).status, 'failed', 'looking changes nothing');

  const form = { csrf: ConsoleClient.csrfOf(preview.text), action: 'retry', state: 'failed', tenant: bulkCo.id };
  t.equal((await operator.post('/console/jobs/bulk', { ...form, reason: ' ' })).status, 400, 'a reason is required');
  t.equal((await operator.post('/console/jobs/bulk', { ...form, csrf: 'forged', reason: 'x' })).status, 403);
  const done = await operator.post('/console/jobs/bulk', { ...form, reason: 'the provider is back' });
  t.equal(done.status, 200);
  t.match(done.text, '3 jobs queued again');
  await waitFor('all three succeeded', async () =>
    (await Promise.all(failed.map((j) => jobStatus(j.id)))).every((s) => s.status === 'succeeded'),
  );
  const audited = await db.anyFirst(
    sql.unsafe`select reason from operator_actions where tenant_id = ${bulkCo.id} and action = 'job.retry'`,
  );
  t.same(
    audited,
    Array(3).fill('the provider is back (bulk retry of 3 jobs)'),
    'one audit row per job, with the reason',
  );
});

t.test(
  'bulk actions are bounded: over 1,000 matching jobs the preview and the action refuse, naming the count, and change nothing',
  async (t) => {
    const big = await createTenant(db, pat.id, 'Big Co');
    await db.query(sql.unsafe`insert into jobs (id, tenant_id, kind, pool, status, input, finished_at)
    select gen_random_uuid(), ${big.id}, 'diag.noop', 'short', 'failed', '{}'::jsonb, now() from generate_series(1, 1001)`);
    const preview = await operator.get(`/console/jobs/bulk?action=retry&state=failed&tenant=${big.id}`);
    t.match(
      preview.text,
      /<p class="error" id="bulk-refused">This filter matches 1,001 jobs, more than the 1,000 one action may change: narrow it/,
    );
    t.notMatch(preview.text, /id="bulk-form"/, 'no button to press');
    const csrf = ConsoleClient.csrfOf((await operator.get('/console/jobs')).text);
    const refused = await operator.post('/console/jobs/bulk', {
      csrf,
      action: 'retry',
      state: 'failed',
      tenant: big.id,
      reason: 'try anyway',
    });
    t.equal(refused.status, 409);
    t.match(refused.text, 'This filter matches 1,001 jobs');
    t.equal(
      Number(
        await db.oneFirst(sql.unsafe`select count(*) from jobs where tenant_id = ${big.id} and status = 'failed'`),
      ),
      1001,
      'nothing changed',
    );
    t.equal(
      Number(await db.oneFirst(sql.unsafe`select count(*) from operator_actions where tenant_id = ${big.id}`)),
      0,
      'nothing audited',
    );
  },
);

t.test('bulk cancel: the queued and running jobs of a filter', async (t) => {
  const owner = await createUser(db, { email: 'busy-owner@example.test', password: PASSWORD });
  const busy = await createTenant(db, owner.id, 'Busy Co');
  const jobs: Array<{ id: string }> = [];
  for (let i = 0; i < 2; i++)
    jobs.push(
      await db.transaction((tx) =>
        enqueueJob(tx, { kind: 'diag.steps', tenantId: busy.id, input: { steps: 100, delayMs: 1_000 } }),
      ),
    );
  const preview = await operator.get(`/console/jobs/bulk?action=cancel&state=open&tenant=${busy.id}`);
  t.match(preview.text, /<strong>2<\/strong> jobs match/);
  const done = await operator.post('/console/jobs/bulk', {
    csrf: ConsoleClient.csrfOf(preview.text),
    action: 'cancel',
    state: 'open',
    tenant: busy.id,
    reason: 'runaway test jobs',
  });
  t.equal(done.status, 200);
  t.match(done.text, '2 jobs cancelled or asked to stop');
  await waitFor('both cancelled', async () =>
    (await Promise.all(jobs.map((j) => jobStatus(j.id)))).every((s) => s.status === 'cancelled'),
  );
});
