// The operator console in Chromium: an operator signs in, watches a job
// appear and finish without reloading, retries a failed job and sees it
// succeed, cancels a running one, and finds both in the audit list; a person
// who is not an operator is refused. No page logs an error or breaks its
// strict CSP (the console's script is its only one, under the page's nonce).
import t from 'tap';
import type { Page } from 'playwright-core';
import { createUser } from '../../core/accounts/users.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJob } from '../../core/jobs/enqueue.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { startTestServer } from '../helpers/app.ts';
import { openPage, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

await withChromium(t, async (browser) => {
  const PASSWORD = 'correct horse battery staple';
  const databaseUrl = await createTestDatabase(t);
  const { db, url } = await startTestServer(t, databaseUrl);
  await startTestWorker(t, databaseUrl);
  await createUser(db, { email: 'op@example.test', password: PASSWORD, operator: true });
  const pat = await createUser(db, { email: 'pat@example.test', password: PASSWORD });
  const acme = await createTenant(db, pat.id, 'Acme Org');
  const enqueue = (input: Record<string, unknown>, maxAttempts?: number) =>
    db.transaction((tx) =>
      enqueueJob(tx, { kind: 'diag.steps', tenantId: acme.id, input, ...(maxAttempts ? { maxAttempts } : {}) }),
    );
  const statusOf = (id: string) => db.oneFirst(sql.unsafe`select status from jobs where id = ${id}`) as Promise<string>;

  /** Every console error, uncaught exception and CSP violation of a page. */
  const watchErrors = (page: Page) => {
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    return errors;
  };
  const signIn = async (page: Page, email: string, path = '/console') => {
    await page.goto(`${url}${path}`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForLoadState();
  };
  const live = (page: Page) =>
    page.waitForFunction(() => document.getElementById('live-status')?.textContent === 'live');

  t.test('an operator watches, retries and cancels jobs live, and finds it all in the audit list', async (t) => {
    const page = await openPage(t, browser);
    const errors = watchErrors(page);
    await signIn(page, 'op@example.test', '/console/jobs');
    t.equal(await page.locator('h1').innerText(), 'Jobs');
    t.same(await page.locator('nav.console a').allInnerTexts(), [
      'Overview',
      'Jobs',
      'Workers',
      'Schedules',
      'Tenants',
      'Audit',
    ]);
    await live(page);

    // A job appears and finishes while the page stays as it is (no reload).
    await page.evaluate(() => ((window as unknown as { stayed: boolean }).stayed = true));
    const job = await enqueue({ steps: 3, delayMs: 200 });
    const row = page.locator(`tr[data-job="${job.id}"]`);
    await row.waitFor();
    await row.locator('.state-succeeded').waitFor();
    t.ok(
      await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed),
      'the same document: updated live, not reloaded',
    );
    t.match(
      await page.locator('#live time').first().getAttribute('title'),
      /your time/,
      'each time shows the local time on hover',
    );

    // A failed job: retried from its page, it succeeds while the page watches.
    const failing = await enqueue({ steps: 1, delayMs: 0, failAttemptsBelow: 2 }, 1);
    await waitFor('the job failed', async () => (await statusOf(failing.id)) === 'failed');
    await page.goto(`${url}/console/jobs/${failing.id}`);
    t.equal((await page.locator('#job-state').innerText()).trim(), 'failed');
    await page.getByLabel('Why (kept in the audit list)').fill('the model provider was down');
    await page.getByRole('button', { name: 'Retry this job' }).click();
    await page.waitForURL(`${url}/console/jobs/${failing.id}`);
    await page.locator('#job-state .state-succeeded').waitFor();
    t.pass('the retried job succeeded on the page');

    // A running job: cancelled from its page.
    const long = await enqueue({ steps: 100, delayMs: 1_000 });
    await waitFor('the job runs', async () => (await statusOf(long.id)) === 'running');
    await page.goto(`${url}/console/jobs/${long.id}`);
    await page.getByLabel('Why (kept in the audit list)').fill('the customer asked to stop');
    await page.getByRole('button', { name: 'Cancel this job' }).click();
    await page.waitForURL(`${url}/console/jobs/${long.id}`);
    await page.locator('#job-state .state-cancelled').waitFor();
    t.pass('the cancelled job ended as cancelled on the page');

    await page.getByRole('link', { name: 'Audit' }).click();
    const audit = await page.locator('table.audit').innerText();
    t.match(audit, /op@example\.test\s+job\.cancel[\s\S]*the customer asked to stop/);
    t.match(audit, /op@example\.test\s+job\.retry[\s\S]*the model provider was down/);

    for (const path of [
      '/console',
      '/console/workers',
      '/console/schedules',
      '/console/tenants',
      `/console/tenants/${acme.id}`,
    ]) {
      await page.goto(`${url}${path}`);
      await live(page);
    }
    t.same(errors, [], 'no console error and no CSP violation on any page');
  });

  t.test("the overview draws the last hour as charts, and at a phone's width nothing scrolls sideways", async (t) => {
    const minute = Math.floor(Date.now() / 60_000) * 60_000;
    for (let i = 1; i <= 30; i++) {
      await db.query(sql.unsafe`insert into queue_samples (at, ready, running, waiting, oldest_ready_s, succeeded, failed)
        values (${new Date(minute - i * 60_000).toISOString()}, ${i % 7}, 2, 1, ${i % 5 === 0 ? null : i / 3}, ${20 + i}, ${i % 4}) on conflict (at) do nothing`);
    }
    const page = await openPage(t, browser, { viewport: { width: 375, height: 800 } });
    const errors = watchErrors(page);
    await signIn(page, 'op@example.test', '/console');
    await live(page);
    // Measured in one go: a live update may swap the charts for fresh ones between two calls.
    const charts = await page.evaluate(() =>
      ['chart-finished', 'chart-depth', 'chart-oldest'].map((id) => {
        const svg = document.getElementById(id);
        const box = svg?.getBoundingClientRect();
        return {
          id,
          width: box?.width ?? 0,
          height: box?.height ?? 0,
          title: svg?.querySelector('title')?.textContent ?? '',
          bars: svg?.querySelectorAll('g[data-minute] rect').length ?? 0,
        };
      }),
    );
    for (const c of charts) {
      t.ok(c.width > 200 && c.height > 40, `${c.id} is drawn (${c.width} x ${c.height})`);
      t.ok(c.title, `${c.id} has a title`);
    }
    t.ok(charts[0]!.bars >= 30, 'a bar for each sampled minute');
    t.equal(
      await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
      true,
      'no sideways scroll at 375 px',
    );
    t.same(errors, [], 'no console error and no CSP violation');
  });

  t.test('a bulk retry: filter the failed jobs, see what will happen, give a reason, confirm', async (t) => {
    const failing = await Promise.all([0, 1].map(() => enqueue({ steps: 1, delayMs: 0, failAttemptsBelow: 2 }, 1)));
    await waitFor('both failed', async () =>
      (await Promise.all(failing.map((j) => statusOf(j.id)))).every((s) => s === 'failed'),
    );
    const page = await openPage(t, browser);
    const errors = watchErrors(page);
    await signIn(page, 'op@example.test', `/console/jobs?state=failed&tenant=${acme.id}`);
    await page.getByRole('combobox', { name: 'Kind' }).selectOption('diag.steps');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForLoadState();
    await page.getByRole('button', { name: 'Retry every job this filter matches…' }).click();
    await page.waitForLoadState();
    t.equal(await page.locator('h1').innerText(), 'Retry failed jobs');
    t.match(
      await page.locator('#bulk-summary').innerText(),
      /^\d+ jobs? match \(kind diag\.steps, tenant [0-9a-f]{8}\)\. Each is queued again/,
    );
    await page.getByLabel(/^Why/).fill('the provider is back');
    await page.getByRole('button', { name: /^Retry these jobs/ }).click();
    await page.waitForLoadState();
    t.match(
      await page.locator('main').innerText(),
      /\d+ jobs? queued again\. Each job has its line in the audit list\./,
    );
    await waitFor('both succeeded', async () =>
      (await Promise.all(failing.map((j) => statusOf(j.id)))).every((s) => s === 'succeeded'),
    );
    t.same(errors, [], 'no console error and no CSP violation');
  });

  t.test('a person who is not an operator is refused and sees nothing', async (t) => {
    const page = await openPage(t, browser);
    const errors = watchErrors(page);
    await signIn(page, 'pat@example.test');
    t.equal(await page.locator('h1').innerText(), 'Not an operator');
    t.match(await page.locator('main').innerText(), /Only the platform operator may use the console/);
    t.notMatch(await page.locator('main').innerText(), /Acme Org|diag\.steps/);
    const response = await page.goto(`${url}/console/jobs`);
    t.equal(response?.status(), 403);
    t.same(
      errors.filter((e) => !/403/.test(e)),
      [],
      'nothing but the refusal itself',
    );
  });
});
