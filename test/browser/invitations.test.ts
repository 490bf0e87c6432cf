// In Chromium, as invited people would: the accept page an invitation link
// opens (api/routes/teams/accept-page.ts). Its script moves the token out of
// the address bar into a form; a person without an account makes one and
// lands in the workspace (and can then use the API there as a Member); the
// used link says so (410); a person with an account signs in and joins; a
// person signed in as another address is refused (the new link is opened,
// in a new tab or the tab already on the page, though the cookie still holds
// her own used invitation); a revoked link says so; without scripts the code
// is pasted. The token reaches no server log. One browser; the subtests
// build on each other.
import type { Page, Response } from 'playwright-core';
import t from 'tap';
import { createUser } from '../../core/accounts/users.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { openPage, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';

await withChromium(t, async (browser) => {
  const PASSWORD = 'correct horse battery staple';
  const GRACE_PASSWORD = 'grace-hopper-1906';
  const WORKSPACE = "Ada's workspace";
  const databaseUrl = await createTestDatabase(t);
  // Debug logs, so "the token is never logged" checks everything the app says.
  const { db, url, logs } = await startTestServerAtOwnUrl(t, databaseUrl, { LOG_LEVEL: 'debug' });
  const ada = await createUser(db, { email: 'ada@example.test', password: PASSWORD, displayName: 'Ada' });
  const workspace = await createTenant(db, ada.id, WORKSPACE);
  await createUser(db, { email: 'lin@example.test', password: PASSWORD, displayName: 'Lin' });
  await createUser(db, { email: 'kim@example.test', password: PASSWORD, displayName: 'Kim' });
  const ACCEPT = `${url}/invitations/accept`;
  const root = t;

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : null) as Record<string, any> };
  };
  const login = async (email: string, password: string) => {
    const res = await call('POST', '/api/auth/login', { email, password });
    if (res.status !== 200) throw new Error(`login of ${email}: ${res.status} ${JSON.stringify(res.json)}`);
    return res.json.token as string;
  };
  const adaToken = await login('ada@example.test', PASSWORD);
  const asAda = (method: string, path: string, body?: unknown) =>
    call(method, path, body, { authorization: `Bearer ${adaToken}`, 'x-tenant-id': workspace.id });

  const tokens: string[] = [];
  const invite = async (email: string, role: 'admin' | 'member' | 'viewer') => {
    const res = await asAda('POST', '/api/tenants/invitations', { email, role });
    if (res.status !== 201) throw new Error(`invitation of ${email}: ${res.status} ${JSON.stringify(res.json)}`);
    const link = res.json.link as string;
    const token = link.slice(link.indexOf('#') + 1);
    tokens.push(token);
    return { id: res.json.id as string, link, token };
  };

  /** The page's h1 once it reads exactly `text`. */
  const heading = async (page: Page, text: string) => {
    const h1 = page.getByRole('heading', { level: 1, name: text, exact: true });
    await h1.waitFor();
    return (await h1.innerText()).trim();
  };

  /**
   * Opens an invitation link as a person would (the script posts the token
   * and is redirected); resolves with the answer of the GET that follows the
   * post, i.e. the invitation's page.
   */
  const openLink = async (page: Page, link: string): Promise<Response> => {
    const [shown] = await Promise.all([
      page.waitForResponse(
        (r) =>
          r.url() === ACCEPT && r.request().method() === 'GET' && r.request().redirectedFrom()?.method() === 'POST',
      ),
      page.goto(link, { waitUntil: 'commit' }),
    ]);
    return shown;
  };

  const grace = { link: '', token: '' };

  t.test('an invitee without an account opens the link, makes her account and joins', async (t) => {
    const invitation = await invite('grace@example.test', 'member');
    Object.assign(grace, invitation);
    t.match(invitation.link, new RegExp(`^${url}/invitations/accept#inv_`), 'the token rides in the fragment');

    const page = await openPage(t, browser);
    const shown = await openLink(page, invitation.link);
    t.equal(shown.status(), 200);
    t.equal(await heading(page, `Join ${WORKSPACE}`), `Join ${WORKSPACE}`);
    t.notMatch(page.url(), '#inv_', 'the address bar no longer holds the token');
    t.notMatch(page.url(), invitation.token);
    t.equal(page.url(), ACCEPT);
    const main = await page.locator('main').innerText();
    t.match(main, /Ada invited grace@example\.test to join the workspace Ada's workspace as Member/);
    t.notMatch(await page.content(), invitation.token, 'nor does the page');
    const cookie = (await page.context().cookies()).find((c) => c.name === 'invitation_token');
    t.match(
      cookie,
      { path: '/invitations', httpOnly: true, sameSite: 'Strict' },
      'the token waits in an HttpOnly cookie of the invitation pages',
    );
    t.equal(
      await page.getByLabel('E-mail').inputValue(),
      'grace@example.test',
      'the account is for the invited address',
    );

    await page.getByLabel('Your name').fill('Grace');
    await page.getByLabel('Password (at least 10 characters)').fill(GRACE_PASSWORD);
    await page.getByLabel('Password again').fill(GRACE_PASSWORD);
    await page.getByRole('button', { name: 'Create account and join' }).click();
    t.equal(await heading(page, `You joined ${WORKSPACE}`), `You joined ${WORKSPACE}`);
    t.match(await page.locator('main').innerText(), `You are now a Member of ${WORKSPACE}.`);
    t.equal((await page.locator('pre').innerText()).trim(), workspace.id, 'the workspace id for x-tenant-id');

    // Over the API, with the password she chose.
    const token = await login('grace@example.test', GRACE_PASSWORD);
    const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': workspace.id };
    const members = await call('GET', '/api/tenants/members', undefined, headers);
    t.equal(members.status, 200);
    t.match(
      members.json.items.find((m: { email: string }) => m.email === 'grace@example.test'),
      { name: 'Grace', role: 'member', owner: false, you: true },
    );
    const session = await call('POST', '/api/chat/sessions', { title: 'First day' }, headers);
    t.equal(session.status, 201, 'a Member may create chat sessions');
  });

  t.test('the used link says so', async (t) => {
    t.ok(grace.link, 'the first invitation');
    const page = await openPage(t, browser);
    const shown = await openLink(page, grace.link);
    t.equal(shown.status(), 410);
    t.equal(await heading(page, 'This invitation was already used'), 'This invitation was already used');
    t.equal(await page.getByRole('button').count(), 0, 'nothing to do');
    t.equal(await page.getByRole('textbox').count(), 0, 'nothing to fill in');
  });

  const lin = { page: null as Page | null };

  t.test('an invitee with an account signs in on the page and joins', async (t) => {
    const invitation = await invite('lin@example.test', 'viewer');
    // Lin's page stays open for the next subtest.
    const page = await openPage(root, browser);
    lin.page = page;
    const shown = await openLink(page, invitation.link);
    t.equal(shown.status(), 200);
    t.equal(await heading(page, `Sign in to join ${WORKSPACE}`), `Sign in to join ${WORKSPACE}`);
    t.equal(await page.getByLabel('E-mail').inputValue(), 'lin@example.test');
    t.equal(await page.getByLabel('Your name').count(), 0, 'no new account for an address that has one');

    await page.getByLabel('Password').fill('not the password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('.error', { hasText: 'The password is wrong.' }).waitFor();
    t.equal(await page.getByRole('button', { name: `Join ${WORKSPACE}` }).count(), 0, 'no join without the password');

    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const join = page.getByRole('button', { name: `Join ${WORKSPACE}` });
    await join.waitFor();
    t.equal((await page.locator('h1').innerText()).trim(), `Join ${WORKSPACE}`);
    t.match(await page.locator('main').innerText(), 'Signed in as lin@example.test.');
    await join.click();
    t.equal(await heading(page, `You joined ${WORKSPACE}`), `You joined ${WORKSPACE}`);
    t.match(await page.locator('main').innerText(), `You are now a Viewer of ${WORKSPACE}.`);

    const members = await asAda('GET', '/api/tenants/members');
    t.match(
      members.json.items.find((m: { email: string }) => m.email === 'lin@example.test'),
      { role: 'viewer' },
    );
  });

  t.test("a person signed in as another address is refused someone else's invitation", async (t) => {
    const page = lin.page;
    if (!page) return t.fail('no signed-in page from the subtest before');
    const invitation = await invite('kim@example.test', 'member');
    const refused = async (tab: Page) => {
      t.equal(await heading(tab, 'This invitation is for someone else'), 'This invitation is for someone else');
      t.match(
        await tab.locator('main').innerText(),
        /This invitation is for kim@example\.test, and you are signed in as lin@example\.test\./,
      );
      t.equal(await tab.getByRole('button', { name: `Join ${WORKSPACE}` }).count(), 0);
      t.notMatch(tab.url(), '#inv_');
    };

    // A new tab of Lin's browser, whose cookie still holds her own (used) invitation.
    const tab = await page.context().newPage();
    t.equal((await openLink(tab, invitation.link)).status(), 403, 'the new link is opened, not the one in the cookie');
    await refused(tab);

    // Lin's first tab is still on the page: the link only changes the fragment.
    t.equal((await openLink(page, invitation.link)).status(), 403, 'opened from the tab already on the page too');
    await refused(page);

    // Signing out shows the sign-in form for the invited address (Kim's).
    await page.getByRole('button', { name: 'Sign out' }).click();
    t.equal(await heading(page, `Sign in to join ${WORKSPACE}`), `Sign in to join ${WORKSPACE}`);
    t.equal(await page.getByLabel('E-mail').inputValue(), 'kim@example.test');
    const members = await asAda('GET', '/api/tenants/members');
    t.notOk(
      members.json.items.some((m: { email: string }) => m.email === 'kim@example.test'),
      'Kim has not joined',
    );
  });

  t.test('a revoked link says so', async (t) => {
    const invitation = await invite('max@example.test', 'member');
    t.equal((await asAda('DELETE', `/api/tenants/invitations/${invitation.id}`)).status, 204);
    const page = await openPage(t, browser);
    const shown = await openLink(page, invitation.link);
    t.equal(shown.status(), 410);
    t.equal(await heading(page, 'This invitation was revoked'), 'This invitation was revoked');
    t.equal(await page.getByRole('button').count(), 0, 'nothing to do');
  });

  t.test('without scripts, the person pastes the code', async (t) => {
    const invitation = await invite('nora@example.test', 'member');
    const page = await openPage(t, browser, { javaScriptEnabled: false });
    const opened = await page.goto(invitation.link);
    t.equal(opened?.status(), 200);
    t.equal((await page.locator('h1').innerText()).trim(), 'Accept an invitation');
    const code = page.getByLabel('Invitation code');
    t.equal(await code.inputValue(), '', 'nothing filled in without the script');
    await code.fill(invitation.token);
    await page.getByRole('button', { name: 'Continue' }).click();
    t.equal(await heading(page, `Join ${WORKSPACE}`), `Join ${WORKSPACE}`);
    t.equal(page.url(), ACCEPT);
    await page.getByLabel('Your name').waitFor();
    t.equal(await page.getByLabel('E-mail').inputValue(), 'nora@example.test');
    t.equal(await page.getByRole('button', { name: 'Create account and join' }).count(), 1, 'the create-account form');
  });

  t.test('no token reaches the server log', async (t) => {
    t.equal(tokens.length, 5, 'every invitation made');
    const logged = logs();
    t.ok(logged.length > 0, 'the app logged (debug)');
    t.match(logged, 'invitation accepted', 'the log has the invitation events');
    for (const token of tokens) t.notOk(logged.includes(token), 'a token is not in the log');
    t.notMatch(logged, /inv_[A-Za-z0-9_-]{10,}/, 'nothing like a token either');
  });
});
