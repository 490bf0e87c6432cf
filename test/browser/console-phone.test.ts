// The operator console read in Chromium as a person reads it: each chart
// holds its own legend, axis labels are drawn at 11 px or more, and at a
// phone's width (375 px) every page keeps its words whole (no header, nav
// link, label or cell broken mid-word) without scrolling sideways. Each page
// is photographed at 375 px into test-results/browser/phone/ (not
// committed) for a person to look at.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import type { Page } from 'playwright-core';
import { createUser } from '../../core/accounts/users.ts';
import { setTenantSuspended } from '../../core/console/actions.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJob } from '../../core/jobs/enqueue.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { startTestServer } from '../helpers/app.ts';
import { brokenWords, openPage, scrollsSideways, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { sourceRoot } from '../helpers/paths.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';

const SHOTS = path.join(sourceRoot, 'test-results/browser/phone');

await withChromium(t, async (browser) => {
  const PASSWORD = 'correct horse battery staple';
  const databaseUrl = await createTestDatabase(t);
  const { db, url } = await startTestServer(t, databaseUrl);
  await startTestWorker(t, databaseUrl);
  const op = await createUser(db, { email: 'op@example.test', password: PASSWORD, operator: true });
  const pat = await createUser(db, { email: 'pat@example.test', password: PASSWORD });
  const acme = await createTenant(db, pat.id, 'Acme Org');
  const enqueue = (input: Record<string, unknown>, maxAttempts?: number) =>
    db.transaction((tx) =>
      enqueueJob(tx, { kind: 'diag.steps', tenantId: acme.id, input, ...(maxAttempts ? { maxAttempts } : {}) }),
    );
  const statusOf = (id: string) => db.oneFirst(sql.unsafe`select status from jobs where id = ${id}`) as Promise<string>;

  // Something on every page: finished and failed jobs, an hour of samples, an action in the audit list.
  const done = await enqueue({ steps: 2, delayMs: 0 });
  const failed = await enqueue({ steps: 1, delayMs: 0, failAttemptsBelow: 2 }, 1);
  await waitFor('the jobs finished', async () =>
    (await Promise.all([statusOf(done.id), statusOf(failed.id)])).every((s) => s === 'succeeded' || s === 'failed'),
  );
  const minute = Math.floor(Date.now() / 60_000) * 60_000;
  for (let i = 1; i <= 60; i++)
    await db.query(sql.unsafe`insert into queue_samples (at, ready, running, waiting, oldest_ready_s, succeeded, failed)
      values (${new Date(minute - i * 60_000).toISOString()}, ${i % 7}, 2, 1, ${i % 5 === 0 ? null : i * 3}, ${1200 + i}, ${i % 4}) on conflict (at) do nothing`);
  const operator = { userId: op.id, email: op.email };
  await setTenantSuspended(db, operator, acme.id, true, 'a payment bounced');
  await setTenantSuspended(db, operator, acme.id, false, 'the payment went through');

  const signIn = async (page: Page) => {
    await page.goto(`${url}/console`);
    await page.getByLabel('E-mail').fill('op@example.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('nav.console');
  };
  const live = (page: Page) =>
    page.waitForFunction(() => document.getElementById('live-status')?.textContent === 'live');

  t.test('each chart holds its own legend, and its axis labels are at least 11 px', async (t) => {
    const page = await openPage(t, browser, { viewport: { width: 1280, height: 900 } });
    await signIn(page);
    await live(page);
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 900 });
      mkdirSync(SHOTS, { recursive: true });
      // The whole page: live updates swap the charts, so an element's picture could lose its element.
      await page.screenshot({ path: path.join(SHOTS, `overview-${width}.png`), fullPage: true });
      const charts = await page.evaluate(() =>
        [...document.querySelectorAll('svg.chart')].map((svg) => {
          const box = svg.closest('.chart-box');
          const legend = box?.querySelector('.legend');
          const inside = (inner: Element, outer: Element) => {
            const a = inner.getBoundingClientRect();
            const b = outer.getBoundingClientRect();
            return (
              a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5 && a.left >= b.left - 0.5 && a.right <= b.right + 0.5
            );
          };
          // The size a label is drawn at: its font size times the SVG's scale, if it is inside one.
          const drawn = (el: Element) => {
            const size = Number.parseFloat(getComputedStyle(el).fontSize);
            const owner = el.closest('svg');
            return owner ? size * (owner.getScreenCTM()?.a ?? 1) : size;
          };
          const labels = box
            ? [...box.querySelectorAll('.axis, .axis *, text')].filter((e) => e.textContent?.trim())
            : [];
          return {
            id: svg.id,
            legend: legend ? legend.textContent?.trim() : null,
            legendInside: !!(box && legend && inside(legend, box)),
            labels: labels.length,
            smallest: Math.min(...labels.map(drawn)),
          };
        }),
      );
      t.same(
        charts.map((c) => c.id),
        ['chart-finished', 'chart-depth', 'chart-oldest'],
        `${width} px: the three charts`,
      );
      for (const c of charts) {
        t.ok(c.legend, `${width} px: ${c.id} has its legend in its own box`);
        t.ok(c.legendInside, `${width} px: ${c.id}'s legend is drawn inside the chart's box`);
        t.ok(c.labels >= 4, `${width} px: ${c.id} has axis labels (${c.labels})`);
        t.ok(c.smallest >= 11, `${width} px: ${c.id}'s smallest axis label is ${c.smallest.toFixed(1)} px`);
      }
    }
  });

  t.test('at 375 px every console page keeps its words whole, and is photographed', async (t) => {
    mkdirSync(SHOTS, { recursive: true });
    const page = await openPage(t, browser, { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const check = async (name: string) => {
      t.equal(await page.evaluate(() => window.innerWidth), 375, `${name}: a phone's width`);
      t.notOk(await scrollsSideways(page), `${name}: no sideways scrolling`);
      t.same(
        await brokenWords(page, 'nav, h1, h2, th, td, label, button, .card-label, .legend, figcaption, .state, header'),
        [],
        `${name}: no word broken across lines`,
      );
      await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
    };
    await page.goto(`${url}/console`);
    await check('sign-in');
    await signIn(page);
    for (const [name, p] of [
      ['overview', '/console'],
      ['jobs', '/console/jobs'],
      ['failed-jobs', '/console/jobs?state=failed'],
      ['job', `/console/jobs/${failed.id}`],
      ['bulk-retry', '/console/jobs/bulk?action=retry&state=failed'],
      ['workers', '/console/workers'],
      ['schedules', '/console/schedules'],
      ['tenants', '/console/tenants'],
      ['tenant', `/console/tenants/${acme.id}`],
      ['audit', '/console/audit'],
    ] as const) {
      const res = await page.goto(`${url}${p}`);
      t.equal(res?.status(), 200, `${name}: answered`);
      await live(page);
      await check(name);
    }
  });
});
