// In Chromium: the landing page is a way in for a person (its sign-in links
// reach the console's sign-in form and the claim page, its manual link the
// API reference) and reads at 375 px, and the API reference keeps its strict
// CSP: no violation is reported while Swagger UI draws.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import type { Page } from 'playwright-core';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { brokenWords, openPage, scrollsSideways, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { sourceRoot } from '../helpers/paths.ts';

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
  const databaseUrl = await createTestDatabase(t);
  const { url } = await startTestServerAtOwnUrl(t, databaseUrl);

  t.test('the landing page links a person to sign-in, the console and the manual', async (t) => {
    const page = await openPage(t, browser);
    await page.goto(`${url}/`);
    t.same(await page.locator('h2').allInnerTexts(), ['Sign in', 'The manual', 'Start here', 'For machines']);

    await page.getByRole('link', { name: 'Operator console' }).click();
    await page.waitForURL(`${url}/console`);
    t.equal(await page.title(), 'Operator console: sign in');
    t.ok(await page.getByLabel('E-mail').isVisible(), 'the sign-in form: e-mail');
    t.ok(await page.getByLabel('Password').isVisible(), 'the sign-in form: password');
    t.ok(await page.getByRole('button', { name: 'Sign in' }).isVisible(), 'the sign-in form: its button');

    await page.goto(`${url}/`);
    await page.getByRole('link', { name: 'Claim an agent' }).click();
    await page.waitForURL(`${url}/agent/identity/claim/verify`);
    t.equal(await page.locator('h1').innerText(), 'Claim an agent');
    t.match(await page.locator('main').innerText(), /Open the claim link your agent gave you/);

    await page.goto(`${url}/`);
    await page.locator('#manual').getByRole('link', { name: 'API reference' }).click();
    await page.waitForURL(`${url}/docs`);
    await page.waitForSelector('.opblock-summary', { timeout: 120_000 });
    t.pass('the manual link opens the API reference');
  });

  t.test('at 375 px the landing page keeps its words whole, and is photographed', async (t) => {
    const page = await openPage(t, browser, { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    await page.goto(`${url}/`);
    t.notOk(await scrollsSideways(page), 'no sideways scrolling');
    t.same(await brokenWords(page, 'header, h1, h2, li, footer'), [], 'no word broken across lines');
    const shots = path.join(sourceRoot, 'test-results/browser/phone');
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, 'landing.png'), fullPage: true });
  });

  t.test('the API reference draws without a CSP violation', async (t) => {
    const page = await openPage(t, browser);
    const violations = await watchCsp(page);
    const res = await page.goto(`${url}/docs`);
    t.equal(res?.status(), 200);
    await page.waitForSelector('.opblock-summary', { timeout: 120_000 });
    // Open one operation: its parameters and models draw more of the UI.
    await page.locator('.opblock-summary').first().click();
    await page.waitForSelector('.opblock-body');
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    t.match(
      res?.headers()['content-security-policy'],
      /style-src 'self'; style-src-elem 'self' 'sha256-[^']+';/,
      'the strict policy',
    );
    t.notMatch(res?.headers()['content-security-policy'], /unsafe-inline/, 'no unsafe-inline');
    t.same(violations, [], 'no CSP violation');
  });
});
