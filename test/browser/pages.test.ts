// In Chromium: the landing page and the API reference render (Swagger UI
// shows the operations of /openapi.json, no request leaves the test server,
// and its strict CSP reports no violation), and at a phone's width (375 px)
// no page scrolls sideways.
import t from 'tap';
import type { Page } from 'playwright-core';
import { createUser } from '../../core/accounts/users.ts';
import { decideApproval } from '../../core/boards/approvals.ts';
import { createBoard } from '../../core/boards/boards.ts';
import { publishBoard } from '../../core/boards/publications.ts';
import { sql } from '../../core/db/pool.ts';
import { startClaim } from '../../core/identity/claims.ts';
import { createRegistration } from '../../core/identity/registrations.ts';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { brokenWords, openPage, scrollsSideways, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createBoardScopes } from '../helpers/fixtures.ts';

/** Every CSP violation the page reports, as the browser describes it. */
async function watchCsp(page: Page): Promise<string[]> {
  const violations: string[] = [];
  page.on('console', (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
  await page.exposeFunction('reportViolation', (v: string) => violations.push(v));
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      (window as unknown as { reportViolation: (v: string) => void }).reportViolation(
        `${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber} ${e.sample}`,
      ),
    );
  });
  return violations;
}

await withChromium(t, async (browser) => {
  const PASSWORD = 'correct horse battery staple';
  const databaseUrl = await createTestDatabase(t);
  const { db, url } = await startTestServerAtOwnUrl(t, databaseUrl);

  t.test('/ and /docs render; Swagger UI lists the operations with nothing fetched from elsewhere', async (t) => {
    const page = await openPage(t, browser);
    const violations = await watchCsp(page);
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));

    const home = await page.goto(`${url}/`);
    t.equal(home?.status(), 200);
    t.ok((await page.locator('h1').innerText()).length > 0, 'a heading');
    t.match(await page.locator('main').innerText(), /agents carry out tasks for companies inside workspaces/i);

    await page.getByRole('link', { name: 'API reference' }).first().click();
    await page.waitForURL(`${url}/docs`);
    // Swagger UI parses the whole document before it draws: on a busy machine that alone takes seconds.
    await page.waitForSelector('.opblock-summary', { timeout: 120_000 });
    const spec = (await (await fetch(`${url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const expected = Object.entries(spec.paths)
      .flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    // The UI mounts only the operations in view: walk down the page and collect what it shows.
    const shown = new Set<string>();
    for (let y = 0; ; ) {
      await page.evaluate((top) => window.scrollTo(0, top), y);
      await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
      const seen = await page.$$eval('.opblock', (blocks) =>
        blocks.map(
          (b) =>
            `${b.querySelector('.opblock-summary-method')?.textContent ?? ''} ${b.querySelector('[data-path]')?.getAttribute('data-path') ?? b.querySelector('[class^="opblock-summary-path"]')?.textContent?.replace(/\u200b/g, '') ?? ''}`,
        ),
      );
      for (const op of seen) shown.add(op);
      const { height, view } = await page.evaluate(() => ({
        height: document.documentElement.scrollHeight,
        view: window.innerHeight,
      }));
      if (y + view >= height) break;
      y += Math.floor(view / 2);
    }
    t.same([...shown].sort(), expected, `all ${expected.length} operations of /openapi.json are shown`);

    t.ok(requested.length > 3, 'the page, its scripts and styles, the document');
    const foreign = requested.filter((u) => !u.startsWith(`${url}/`));
    t.same(foreign, [], 'every request went to the test server');

    // Open one operation: its parameters and models draw more of the UI.
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.locator('.opblock-summary').first().click();
    await page.waitForSelector('.opblock-body');
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    const policy = (await fetch(`${url}/docs`)).headers.get('content-security-policy');
    t.match(policy, /style-src 'self'; style-src-elem 'self' 'sha256-[^']+';/, 'the strict policy');
    t.notMatch(policy, /unsafe-inline/, 'no unsafe-inline');
    t.same(violations, [], 'no CSP violation while Swagger UI draws');
  });

  t.test('at 375 px no page scrolls sideways', async (t) => {
    // What the pages show: a hosted board with long words, a pending approval, a claim.
    const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.5', claimTokenTtlS: 600 });
    const admin = await createUser(db, { email: 'phone-admin@example.test', password: PASSWORD });
    await db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${registration.tenant_id}, ${admin.id}, 'admin')`,
    );
    const long = `https://example.test/${'a-very-long-path-segment'.repeat(8)}`;
    const content = {
      summary: `A long link: ${long}\n\n${'Unbreakable'.repeat(12)} words.`,
      metrics: [
        { label: 'Annual recurring revenue', value: 123456789.25, unit: 'EUR' },
        { label: 'Signups', value: 1250000, unit: 'people' },
        { label: 'Users', value: 4321 },
        { label: 'Churn', value: 1.2, unit: '%' },
      ],
      sections: [{ title: 'Details', owner: { name: 'Ops', contact: long, tags: ['x', 'y'] } }],
      items: [long, { deal: 'A', amount: 10 }],
    };
    const board = await createBoard(
      db,
      registration.tenant_id,
      { principalId: registration.principal_id },
      {
        title: `Quarterly ${'review'.repeat(10)}`,
        scopeType: 'company',
        scopeId: (await createBoardScopes(db, registration.tenant_id)).companyId,
        content,
      },
    );
    const publish = () =>
      publishBoard(db, {
        tenantId: registration.tenant_id,
        boardId: board.id,
        principalId: registration.principal_id,
        body: { visibility: 'public' },
      });
    const asked = await publish();
    if (asked.kind !== 'approval_required') throw new Error(asked.kind);
    await decideApproval(db, registration.tenant_id, asked.approvalId, admin.id, 'approved');
    const published = await publish();
    if (published.kind !== 'published' || !published.link) throw new Error(published.kind);
    const pending = await publishBoard(db, {
      tenantId: registration.tenant_id,
      boardId: board.id,
      principalId: registration.principal_id,
      body: { version: 1, visibility: 'public' },
    });
    if (pending.kind !== 'approval_required') throw new Error(pending.kind);
    const service = await createRegistration(db, {
      type: 'service_auth',
      loginHint: 'phone-admin@example.test',
      ip: '10.9.0.5',
      claimTokenTtlS: 600,
    });
    const claim = await startClaim(db, { claimToken: service.claimToken, loginHint: 'phone-admin@example.test' });

    const page = await openPage(t, browser, { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const check = async (name: string, status?: number) => {
      t.equal(await page.evaluate(() => window.innerWidth), 375, `${name}: a phone's width`);
      t.notOk(await scrollsSideways(page), `${name}: no horizontal scrolling`);
      if (name !== 'API reference')
        t.same(
          await brokenWords(page, 'header, main, footer'),
          [],
          `${name}: no word broken across lines (but those wider than the screen)`,
        );
      if (status) t.ok(status < 500, `${name}: answered`);
    };
    for (const [name, path] of [
      ['landing page', '/'],
      ['API reference', '/docs'],
      ['hosted board', `/boards/public/${published.link.secret}`],
      ['approval sign-in', `/boards/approvals/${pending.approvalId}`],
      ['claim sign-in', `/agent/identity/claim/verify/${claim.attemptId}`],
      ['404 page', `/no/such/${'page'.repeat(30)}`],
    ] as const) {
      const res = await page.goto(`${url}${path}`);
      // As above: Swagger UI may take seconds to parse the document on a busy machine.
      if (name === 'API reference') await page.waitForSelector('.opblock-summary', { timeout: 120_000 });
      await check(name, res?.status());
    }
    // On a desktop window a board's figures stay whole: no number wraps inside itself.
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(`${url}/boards/public/${published.link.secret}`);
    const lines = await page.$$eval('.card-value', (cards) =>
      cards.map((card) => {
        // The figure is the card value's first node; count the lines its text sits on.
        const range = document.createRange();
        range.selectNodeContents(card.firstChild!);
        return [
          card.firstChild!.textContent,
          new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size,
        ] as const;
      }),
    );
    t.same(
      lines,
      [
        ['123,456,789.25', 1],
        ['1,250,000', 1],
        ['4,321', 1],
        ['1.2', 1],
      ],
      'at 1,100 px every figure is on one line',
    );
    await page.setViewportSize({ width: 375, height: 740 });
    // Signed in, the approval page shows details and the preview.
    await page.goto(`${url}/boards/approvals/${pending.approvalId}`);
    await page.getByLabel('E-mail').fill('phone-admin@example.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('.preview');
    await check('approval decision page');
  });
});
