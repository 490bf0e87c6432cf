// In Chromium: the landing page is a way in for a person (its sign-in links
// reach a person's sign-in and account page, the console's sign-in form and
// the claim page, its manual link the API reference) and reads at 375 px.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createUser } from '../../core/accounts/users.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { brokenWords, openPage, scrollsSideways, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { sourceRoot } from '../helpers/paths.ts';

await withChromium(t, async (browser) => {
  const databaseUrl = await createTestDatabase(t);
  const { db, url } = await startTestServerAtOwnUrl(t, databaseUrl);
  const PASSWORD = 'correct horse battery staple';

  t.test('the landing page links a person to sign-in, the console and the manual', async (t) => {
    const page = await openPage(t, browser);
    await page.goto(`${url}/`);
    t.same(await page.locator('h2').allInnerTexts(), ['Sign in', 'The manual', 'Start here', 'For machines']);

    await page.getByRole('link', { name: 'Your account' }).click();
    await page.waitForURL(`${url}/account`);
    t.equal(await page.locator('h1').innerText(), 'Sign in');
    t.ok(await page.getByLabel('E-mail').isVisible(), 'a sign-in form for people');
    await page.goto(`${url}/`);

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
    // Swagger UI's page (its drawing is checked below and in pages.test.ts).
    t.equal(await page.locator('#swagger-ui').count(), 1, 'the manual link opens the API reference');
  });

  t.test('a person signs in from the landing page, sees their workspaces, and signs out', async (t) => {
    const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD });
    await createTenant(db, ada.id, 'Analytical Engines');
    await createUser(db, { email: 'op@example.test', password: PASSWORD, operator: true });
    const page = await openPage(t, browser);
    await page.goto(`${url}/`);
    await page.getByRole('link', { name: 'Your account' }).click();
    const signIn = async (email: string, password: string) => {
      await page.getByLabel('E-mail').fill(email);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForLoadState();
    };
    await signIn('ada@example.test', 'not her password');
    t.equal(await page.locator('.error').innerText(), 'E-mail or password is wrong.');
    await signIn('ada@example.test', PASSWORD);
    t.equal(await page.locator('h1').innerText(), 'Your account');
    t.match(await page.locator('main').innerText(), /Signed in as ada@example\.test/);
    t.match(await page.locator('#workspaces').innerText(), /Analytical Engines\s+admin \(owner\)\s+free/);
    t.equal(await page.getByRole('link', { name: 'open the operator console' }).count(), 0, 'no console for her');
    const cookie = (await page.context().cookies()).find((c) => c.name === 'account_session')!;
    t.equal(cookie.path, '/account', 'the session cookie is for this page only');
    t.ok(cookie.httpOnly, 'HttpOnly');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForLoadState();
    t.equal(await page.locator('h1').innerText(), 'Sign in');
    const copied = await fetch(`${url}/account`, { headers: { cookie: `${cookie.name}=${cookie.value}` } });
    t.match(await copied.text(), /<h1>Sign in<\/h1>/, 'a copy of the old cookie signs nobody in');
    const forged = await fetch(`${url}/account/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email: 'ada@example.test', password: PASSWORD }).toString(),
      redirect: 'manual',
    });
    t.equal(forged.status, 403, 'a sign-in without the form CSRF token is refused');

    await signIn('op@example.test', PASSWORD);
    t.match(await page.locator('#no-workspaces').innerText(), /You are in no workspace yet/);
    await page.getByRole('link', { name: 'open the operator console' }).click();
    await page.waitForURL(`${url}/console`);
    t.equal(await page.title(), 'Operator console: sign in', 'the console has its own sign-in');
  });

  t.test('at 375 px the landing and account pages keep their words whole, and are photographed', async (t) => {
    const page = await openPage(t, browser, { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const shots = path.join(sourceRoot, 'test-results/browser/phone');
    mkdirSync(shots, { recursive: true });
    for (const [name, p] of [
      ['landing', '/'],
      ['account-sign-in', '/account'],
    ] as const) {
      await page.goto(`${url}${p}`);
      t.notOk(await scrollsSideways(page), `${name}: no sideways scrolling`);
      t.same(await brokenWords(page, 'header, h1, h2, li, label, button, footer'), [], `${name}: no word broken`);
      await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
    }
  });
});
