// altidp's redirect login in Chromium, across two sites as in production:
// the service at http://localhost:<port>, the provider (oidc-provider) at
// http://127.0.0.1:<port>. The provider's form_post page submits itself to
// our callback as a cross-site POST, which must still carry the flow's
// binding cookie (SameSite=None; Secure), and the browser lands on `next`
// with the ticket in the fragment.
import t from 'tap';
import { freePort } from '../../ops/embedded-postgres.ts';
import { buildTestApp } from '../helpers/app.ts';
import { openPage, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { startOidcServer } from '../helpers/oidc-server.ts';

await withChromium(t, async (browser) => {
  const port = await freePort();
  const base = `http://localhost:${port}`;
  const op = await startOidcServer(t, {
    clients: [
      {
        client_id: 'platform-alt',
        client_secret: 'platform-alt-secret-0123456789',
        redirect_uris: [`${base}/api/auth/altidp/callback`],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    accounts: [{ sub: 'browser-sub', email: 'browser@relay.example', email_verified: true }],
  });
  const databaseUrl = await createTestDatabase(t);
  const api = await buildTestApp(t, databaseUrl, {
    BASE_URL: base,
    PORT: String(port),
    ALTIDP_ISSUER: op.issuer,
    ALTIDP_CLIENT_ID: 'platform-alt',
    ALTIDP_CLIENT_SECRET: 'platform-alt-secret-0123456789',
  });
  await api.app.listen({ host: '127.0.0.1', port });

  t.test('start → provider → its form_post page → callback → next#ticket → result', async (t) => {
    const page = await openPage(t, browser);
    op.next = { accountId: 'browser-sub' };
    await page.goto(`${base}/api/auth/altidp/start/?mode=onboarding&next=/`);
    await page.waitForURL(/#altidp_(ticket|error)=/);
    const landed = new URL(page.url());
    t.equal(`${landed.origin}${landed.pathname}`, `${base}/`, 'back on the service, at next');
    const ticket = new URLSearchParams(landed.hash.slice(1)).get('altidp_ticket');
    t.ok(ticket, `a ticket, not an error (${landed.hash})`);
    t.ok(await page.locator('h1').count(), 'the landing page rendered');

    const res = await fetch(`${base}/api/auth/altidp/result/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ticket }),
    });
    t.equal(res.status, 200);
    t.match(await res.json(), { newUser: true, mode: 'onboarding', user: { email: 'browser@relay.example' } });
  });

  t.test('the person declines at the provider: back at next with the error, no ticket', async (t) => {
    const page = await openPage(t, browser);
    op.next = { deny: true };
    await page.goto(`${base}/api/auth/altidp/start/?next=/`);
    await page.waitForURL(/#altidp_(ticket|error)=/);
    t.equal(new URL(page.url()).hash, '#altidp_error=access_denied');
  });
});
