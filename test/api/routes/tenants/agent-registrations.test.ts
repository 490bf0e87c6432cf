// People act on their agents. A claimed agent works in the organization its
// person chose (its own workspace kept); the tenant's Admin lists its agent
// registrations, revokes one (401 registration_revoked, on every replica) or
// unlinks one (401 principal_not_linked); a person leaving the tenant unlinks
// the agents they claimed there; a token issued for a tenant the agent no
// longer acts in is 401 identity_conflict.
import t from 'tap';
import { createUser } from '../../../../core/accounts/users.ts';
import { signPlatformToken } from '../../../../core/auth/platform-token.ts';
import { sql } from '../../../../core/db/pool.ts';
import { createTenant } from '../../../../core/tenants/tenants.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { TEST_SECRET } from '../../../helpers/config.ts';
import { createTestDatabase } from '../../../helpers/db.ts';
import { createBoardScopes, createMember } from '../../../helpers/fixtures.ts';
import { waitFor } from '../../../helpers/wait.ts';
import { agent as agentCalls, Browser, pagePath, PASSWORD, register } from '../identity/claim-flow.ts';

const databaseUrl = await createTestDatabase(t);
const { app, db, config } = await buildTestApp(t, databaseUrl);
// A second api replica on the same database: revocations must reach it too.
const replica = await buildTestApp(t, databaseUrl);

const pat = await createUser(db, { email: 'pat@example.test', password: PASSWORD });
const org = await createTenant(db, pat.id, 'Pat Org');
const patToken = await signPlatformToken({ userId: pat.id }, Buffer.from(TEST_SECRET, 'base64'), config.baseUrl);
const asPat = (tenantId = org.id) => ({ authorization: `Bearer ${patToken}`, 'x-tenant-id': tenantId });

/** An agent claimed by Pat through the whole ceremony with Pat Org chosen, with an access token. */
async function claimedAgent() {
  const reg = await register(db, 'service_auth', 'pat@example.test');
  const calls = agentCalls(app);
  const browser = new Browser(app, pagePath(await calls.claim(reg.claimToken, 'pat@example.test')));
  await browser.signIn('pat@example.test');
  // Each claim makes Pat Admin of that agent's workspace, so later claims offer several: choose.
  const { code } = await browser.confirm({ organization_id: org.id });
  const done = await calls.complete(reg.claimToken, code);
  if (done.statusCode !== 200) throw new Error(`complete: ${done.body}`);
  const assertion = done.json().identity.assertion as string;
  const token = async () => {
    const res = await calls.exchange(assertion, `${config.baseUrl}/api/agent`);
    return { status: res.statusCode, body: res.json(), token: res.json().access_token as string };
  };
  return {
    id: reg.registration.id,
    ownTenantId: reg.registration.tenant_id,
    token: (await token()).token,
    newToken: token,
  };
}
const me = (token: string, on = app) =>
  on.inject({ url: '/api/agent/v1/me', headers: { authorization: `Bearer ${token}` } });

t.test('a claimed agent works in the organization chosen at its claim', async (t) => {
  const a = await claimedAgent();
  const res = await me(a.token);
  t.equal(res.statusCode, 200);
  t.match(res.json(), {
    workspace: { id: org.id, name: 'Pat Org' },
    own_workspace: { id: a.ownTenantId },
    registration: { claim_state: 'claimed' },
  });
  await db.query(sql.unsafe`update tenants set plan = 'pro' where id = ${org.id}`);
  const { companyId } = await createBoardScopes(db, org.id);
  // The plan change reaches the api's cache by NOTIFY, a moment after the commit.
  const companies = await waitFor('the api to see the pro plan', async () => {
    const res = await app.inject({ url: '/api/agent/v1/companies', headers: { authorization: `Bearer ${a.token}` } });
    return res.statusCode === 402 ? null : res;
  });
  t.equal(companies.statusCode, 200);
  t.same(
    companies.json().items.map((c: { id: string }) => c.id),
    [companyId],
  );
});

t.test("an Admin lists the tenant's agents; Viewers, outsiders and other tenants see nothing", async (t) => {
  const a = await claimedAgent();
  const listed = await app.inject({ url: '/api/tenants/agent-registrations?limit=100', headers: asPat() });
  t.equal(listed.statusCode, 200);
  t.match(
    listed.json().items.find((i: { id: string }) => i.id === a.id),
    {
      type: 'service_auth',
      status: 'active',
      claimState: 'claimed',
      linked: true,
      ownWorkspaceId: a.ownTenantId,
      actsInTenantId: org.id,
      claimedBy: 'pat@example.test',
    },
  );
  // Its own workspace's Admin (Pat, since the claim) sees it there too.
  t.ok(
    (await app.inject({ url: '/api/tenants/agent-registrations', headers: asPat(a.ownTenantId) }))
      .json()
      .items.some((i: { id: string }) => i.id === a.id),
  );
  const viewer = await createMember(db, 'admin');
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${org.id}, ${viewer.userId}, 'viewer')`,
  );
  t.equal(
    (
      await app.inject({
        url: '/api/tenants/agent-registrations',
        headers: { authorization: `Bearer ${viewer.token}`, 'x-tenant-id': org.id },
      })
    ).statusCode,
    403,
  );
  const other = await createMember(db, 'admin');
  const otherHeaders = { authorization: `Bearer ${other.token}`, 'x-tenant-id': other.tenantId };
  t.same(
    (await app.inject({ url: '/api/tenants/agent-registrations', headers: otherHeaders })).json().items,
    [],
    "another tenant's Admin sees none of them",
  );
  for (const action of ['revoke', 'unlink']) {
    const res = await app.inject({
      method: 'POST',
      url: `/api/tenants/agent-registrations/${a.id}/${action}`,
      headers: otherHeaders,
    });
    t.equal(res.statusCode, 404, `${action} from another tenant`);
    t.match(res.json(), { error: 'not_found' });
  }
  t.equal(
    (await app.inject({ method: 'POST', url: '/api/tenants/agent-registrations/not-a-uuid/revoke', headers: asPat() }))
      .statusCode,
    400,
  );
  t.equal((await me(a.token)).statusCode, 200, 'nothing changed');
});

t.test(
  'revoke: the next call answers registration_revoked on every replica; its token exchange is refused',
  async (t) => {
    const a = await claimedAgent();
    // Both replicas have the registration cached.
    t.equal((await me(a.token)).statusCode, 200);
    t.equal((await me(a.token, replica.app)).statusCode, 200);
    const revoked = await app.inject({
      method: 'POST',
      url: `/api/tenants/agent-registrations/${a.id}/revoke`,
      headers: asPat(),
    });
    t.equal(revoked.statusCode, 200);
    t.match(revoked.json(), { id: a.id, status: 'revoked', revokedAt: String });
    for (const [name, on] of [
      ['this replica', app],
      ['the other replica', replica.app],
    ] as const) {
      const res = await waitFor(`${name} to refuse`, async () => {
        const r = await me(a.token, on);
        return r.statusCode === 401 ? r : null;
      });
      t.match(res.json(), { code: 'registration_revoked' }, name);
    }
    t.match(await a.newToken(), { status: 400, body: { error: 'invalid_grant' } });
    const again = await app.inject({
      method: 'POST',
      url: `/api/tenants/agent-registrations/${a.id}/revoke`,
      headers: asPat(),
    });
    t.same(again.json(), revoked.json(), 'repeating it changes nothing');
  },
);

t.test('unlink: the next call answers principal_not_linked', async (t) => {
  const a = await claimedAgent();
  t.equal((await me(a.token)).statusCode, 200);
  const unlinked = await app.inject({
    method: 'POST',
    url: `/api/tenants/agent-registrations/${a.id}/unlink`,
    headers: asPat(),
  });
  t.equal(unlinked.statusCode, 200);
  t.match(unlinked.json(), { linked: false, principal: { status: 'unlinked' }, status: 'active' });
  const res = await waitFor('the api to refuse', async () => {
    const r = await me(a.token);
    return r.statusCode === 401 ? r : null;
  });
  t.match(res.json(), { code: 'principal_not_linked', next_action: 'reauthenticate' });
  t.match(await a.newToken(), {
    status: 400,
    body: { error: 'invalid_grant', error_description: /principal_not_linked/ },
  });
});

t.test('the person who claimed an agent leaves the tenant it acts in: principal_not_linked', async (t) => {
  const a = await claimedAgent();
  t.equal((await me(a.token)).statusCode, 200);
  await db.query(sql.unsafe`delete from tenant_memberships where tenant_id = ${org.id} and user_id = ${pat.id}`);
  t.teardown(() =>
    db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${org.id}, ${pat.id}, 'admin') on conflict do nothing`,
    ),
  );
  const res = await waitFor('the api to refuse', async () => {
    const r = await me(a.token);
    return r.statusCode === 401 ? r : null;
  });
  t.match(res.json(), { code: 'principal_not_linked' });
});

t.test(
  'a token for a tenant the agent no longer acts in: identity_conflict; a new token works where it acts now',
  async (t) => {
    const second = await createTenant(db, pat.id, 'Short-lived Org');
    // Pat belongs to two organizations now: choose the second one on the page.
    const reg = await register(db, 'service_auth', 'pat@example.test');
    const calls = agentCalls(app);
    const browser = new Browser(app, pagePath(await calls.claim(reg.claimToken, 'pat@example.test')));
    await browser.signIn('pat@example.test');
    const { code } = await browser.confirm({ organization_id: second.id });
    const assertion = (await calls.complete(reg.claimToken, code)).json().identity.assertion as string;
    const exchange = async () =>
      (
        await app.inject({
          method: 'POST',
          url: '/oauth2/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({
            grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
            assertion,
            resource: `${config.baseUrl}/api/agent`,
          }).toString(),
        })
      ).json().access_token as string;
    const token = await exchange();
    t.match((await me(token)).json(), { workspace: { id: second.id } });

    // The organization is deleted: the agent acts in its own workspace again.
    await db.query(sql.unsafe`delete from tenants where id = ${second.id}`);
    const res = await waitFor('the api to refuse', async () => {
      const r = await me(token);
      return r.statusCode === 401 ? r : null;
    });
    t.match(res.json(), { code: 'identity_conflict', next_action: 'reauthenticate' });
    t.match(
      (await me(await exchange())).json(),
      { workspace: { id: reg.registration.tenant_id } },
      'a new token from the assertion works',
    );
  },
);
