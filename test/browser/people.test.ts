// In Chromium, as people and an agent would: the claim ceremony (the person
// picks an organization before any code is shown, reads the code, the agent
// completes over HTTP and gets tokens, and works in the chosen
// organization: its plan, its companies), the approval page (a Viewer is
// refused, an Admin approves, the agent's identical retry publishes) and the
// hosted board (a report; after unpublish, the HTML 404). One browser; the
// subtests build on each other.
import t from 'tap';
import { z } from 'zod';
import { createUser } from '../../core/accounts/users.ts';
import { sql } from '../../core/db/pool.ts';
import { createTenant } from '../../core/tenants/tenants.ts';
import { startTestServerAtOwnUrl } from '../helpers/app.ts';
import { openPage, textsOf, withChromium } from '../helpers/browser.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { createBoardScopes } from '../helpers/fixtures.ts';

await withChromium(t, async (browser) => {
  const PASSWORD = 'correct horse battery staple';
  const databaseUrl = await createTestDatabase(t);
  const { db, url } = await startTestServerAtOwnUrl(t, databaseUrl);
  const pat = await createUser(db, { email: 'pat@example.test', password: PASSWORD, displayName: 'Pat' });
  await createTenant(db, pat.id, 'Acme Org');
  const beta = await createTenant(db, pat.id, 'Beta Org');
  const vic = await createUser(db, { email: 'vic@example.test', password: PASSWORD });

  let keys = 0;
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(path.startsWith('http') ? path : `${url}${path}`, {
      method,
      headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, json: (await res.json()) as Record<string, any> };
  };
  const agent = { token: '', workspaceId: '', approveUrl: '', boardId: '', linkUrl: '' };
  const asAgent = (method: string, path: string, body: unknown) =>
    call(method, path, body, { authorization: `Bearer ${agent.token}`, 'idempotency-key': `browser-key-${++keys}` });

  t.test('the claim ceremony: organization first, then the code, then the agent gets tokens', async (t) => {
    const registered = await call('POST', '/agent/identity', { type: 'service_auth', login_hint: 'pat@example.test' });
    t.equal(registered.status, 201);
    const claimToken = registered.json.claim.token as string;
    const started = await call('POST', registered.json.claim.claim_endpoint, {
      type: 'service_auth',
      claim_token: claimToken,
      login_hint: 'pat@example.test',
    });
    t.equal(started.status, 200);

    const page = await openPage(t, browser);
    await page.goto(started.json.attempt.verification_uri);
    t.equal(await page.locator('h1').innerText(), 'Sign in to claim an agent');
    t.equal(await page.getByLabel('E-mail').inputValue(), 'pat@example.test', 'the claim names its account');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('text=Step 1: choose the organization');
    t.equal(await page.locator('h1').innerText(), 'Claim an agent');
    const headings = await textsOf(page, 'h2');
    t.same(headings, ['Step 1: choose the organization', 'Step 2: confirm'], 'the organization comes first');
    t.match(await page.locator('main').innerText(), /The agent will act inside the one you choose/);
    t.equal(await page.locator('.code').count(), 0, 'no code yet');

    // Confirm without a choice: the browser asks for one; still no code.
    await page.getByRole('button', { name: 'Confirm' }).click();
    t.equal(await page.locator('.code').count(), 0, 'no code without an organization');
    t.equal(await page.locator('h1').innerText(), 'Claim an agent');

    await page.getByLabel('Beta Org').check();
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.waitForSelector('.code');
    t.equal(await page.locator('h1').innerText(), 'Give this code to the agent');
    const code = (await page.locator('.code').innerText()).trim();
    t.match(code, /^[A-Z]{4}-[A-Z]{4}$/);
    // The claim pages wear the shared header and footer, and name the agent once.
    t.equal(await page.locator('header a').innerText(), 'Agent platform');
    t.same(await textsOf(page, 'footer a'), ['Home', 'API reference']);
    t.notMatch(await page.locator('main').innerText(), /Agent Agent/);
    t.match(
      await page.locator('main').innerText(),
      `The agent (registration ${registered.json.registration.id}) will then be bound`,
    );

    const done = await call('POST', '/agent/identity/claim/complete', { claim_token: claimToken, user_code: code });
    t.equal(done.status, 200);
    const assertion = done.json.identity.assertion as string;
    const bound = await db.one(
      sql.type(
        z.object({ tenant_id: z.string(), organization_id: z.string().nullable() }),
      )`select tenant_id, organization_id from agent_registrations where id = ${registered.json.registration.id}`,
    );
    t.equal(bound.organization_id, beta.id, 'the chosen organization');
    t.not(bound.tenant_id, beta.id, 'the registration keeps its own workspace (never merged)');
    // The chosen organization is on Pro and has a company: the agent works there.
    await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${beta.id}`);
    const { companyId } = await createBoardScopes(db, beta.id);
    agent.workspaceId = beta.id;

    const tokenRes = await fetch(`${url}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        assertion,
        resource: `${url}/api/agent`,
      }),
    });
    t.equal(tokenRes.status, 200);
    const token = (await tokenRes.json()) as { access_token: string; scope: string };
    t.match(token.scope, 'svc:boards:publish');
    agent.token = token.access_token;

    const me = await call('GET', '/api/agent/v1/me', undefined, { authorization: `Bearer ${agent.token}` });
    t.match(
      me.json,
      { workspace: { id: beta.id, name: 'Beta Org', plan: 'pro' }, own_workspace: { id: bound.tenant_id } },
      '/me names the organization',
    );
    const capabilities = await call('GET', '/api/agent/v1/capabilities', undefined, {
      authorization: `Bearer ${agent.token}`,
    });
    t.match(capabilities.json, { identity: { workspace: { id: beta.id } }, plan: { name: 'pro', company_work: true } });
    const companies = await call('GET', '/api/agent/v1/companies', undefined, {
      authorization: `Bearer ${agent.token}`,
    });
    t.equal(companies.status, 200, "company reads use the organization's plan");
    t.same(
      companies.json.items.map((c: { id: string }) => c.id),
      [companyId],
      "and the organization's companies",
    );
  });

  t.test('the approval page: a Viewer is refused, an Admin approves, the retry publishes', async (t) => {
    t.ok(agent.token, 'the claimed agent');
    await db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${agent.workspaceId}, ${vic.id}, 'viewer')`,
    );
    const content = {
      summary: 'A steady week.\n\nSignups grew in <every> region.',
      // A list keeps its order (stored as jsonb, an object's keys do not).
      metrics: [
        { label: 'Signups', value: 1250 },
        { label: 'Churn', value: 1.5, unit: '%' },
      ],
      items: ['Launch the EMEA campaign', 'Hire a second support engineer'],
    };
    const created = await asAgent('POST', '/api/agent/v1/boards', {
      title: 'Weekly report',
      scope_type: 'company',
      scope_id: (await createBoardScopes(db, agent.workspaceId)).companyId,
      content,
    });
    t.equal(created.status, 201);
    agent.boardId = created.json.id;
    const asked = await asAgent('POST', `/api/agent/v1/boards/${agent.boardId}/publish`, { visibility: 'public' });
    t.equal(asked.json.state, 'approval_required');
    agent.approveUrl = asked.json.approval.approve_url;
    t.equal(new URL(agent.approveUrl).origin, url);

    const viewer = await openPage(t, browser);
    await viewer.goto(agent.approveUrl);
    await viewer.getByLabel('E-mail').fill('vic@example.test');
    await viewer.getByLabel('Password').fill(PASSWORD);
    const [refused] = await Promise.all([
      viewer.waitForResponse((r) => r.url() === agent.approveUrl && r.request().method() === 'GET'),
      viewer.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    t.equal(refused.status(), 403);
    t.equal(await viewer.locator('h1').innerText(), 'An Admin must decide');
    t.notMatch(await viewer.locator('main').innerText(), 'Weekly report', 'a Viewer sees nothing of the board');

    const admin = await openPage(t, browser);
    await admin.goto(agent.approveUrl);
    t.equal(await admin.locator('h1').innerText(), 'Sign in to review a publish request');
    await admin.getByLabel('E-mail').fill('pat@example.test');
    await admin.getByLabel('Password').fill(PASSWORD);
    await admin.getByRole('button', { name: 'Sign in' }).click();
    await admin.waitForSelector('h1:text("Publish this board?")');
    const details = await admin.locator('dl').first().innerText();
    for (const text of ['Weekly report', 'public (anyone with the link)', 'Version', 'Asked by', 'Asked at'])
      t.match(details, text);
    t.match(await admin.locator('.preview').innerText(), 'Signups grew in <every> region.', 'a preview of the content');
    await admin.getByRole('button', { name: 'Approve' }).click();
    await admin.waitForSelector('.ok');
    t.match(await admin.locator('dl').first().innerText(), /Approved by pat@example\.test/);
    t.equal(await admin.getByRole('button', { name: 'Approve' }).count(), 0);

    const published = await asAgent('POST', `/api/agent/v1/boards/${agent.boardId}/publish`, { visibility: 'public' });
    t.equal(published.json.state, 'published', 'the identical retry publishes');
    agent.linkUrl = published.json.link.url;
  });

  t.test('the hosted board reads as a report; after unpublish the link shows the 404 page', async (t) => {
    t.ok(agent.linkUrl, 'a public link');
    const page = await openPage(t, browser);
    const opened = await page.goto(agent.linkUrl);
    t.equal(opened?.status(), 200);
    t.equal(await page.locator('h1').innerText(), 'Weekly report');
    t.match(await page.locator('main').innerText(), 'Version 1');
    t.same(await textsOf(page, '.report > p'), ['A steady week.', 'Signups grew in <every> region.']);
    t.same(await textsOf(page, '.card-label'), ['Signups', 'Churn']);
    t.same(await textsOf(page, '.card-value'), ['1,250', '1.5 %']);
    t.same(await textsOf(page, 'ul.items li'), ['Launch the EMEA campaign', 'Hire a second support engineer']);

    t.equal((await asAgent('POST', `/api/agent/v1/boards/${agent.boardId}/unpublish`, {})).status, 200);
    const gone = await page.goto(agent.linkUrl);
    t.equal(gone?.status(), 404);
    t.equal(await page.locator('h1').innerText(), 'This board link does not work');
    t.notMatch(await page.locator('body').innerText(), 'Weekly report');
  });
});
