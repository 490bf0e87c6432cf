// Connected partner accounts against a real OpenID Connect provider
// (oidc-provider on loopback): the provider with our confidential client and
// the catalog's scopes, an app configured for it, and a person who connects
// an account the way a browser would (start, authorize, callback).
import type { Test } from 'tap';
import { ALL_SCOPES } from '../../core/partner-accounts/catalog.ts';
import { buildTestApp } from './app.ts';
import { createMember, type Member } from './fixtures.ts';
import { startOidcServer, type OidcTestServer } from './oidc-server.ts';

export const CONNECT_CLIENT = 'platform-connect';
export const CONNECT_SECRET = 'platform-connect-secret-0123456789abcdef';
export const CONNECT_REDIRECT = 'http://127.0.0.1:9/oauth/partner/callback';

export async function startPartnerProvider(t: Test) {
  return startOidcServer(t, {
    clients: [
      {
        client_id: CONNECT_CLIENT,
        client_secret: CONNECT_SECRET,
        redirect_uris: [CONNECT_REDIRECT],
        token_endpoint_auth_method: 'client_secret_post',
        grant_types: ['authorization_code', 'refresh_token'],
      },
    ],
    accounts: [
      { sub: 'alice-sub', email: 'alice@example.com', email_verified: true, name: 'Alice' },
      { sub: 'bob-sub', email: 'bob@example.com', email_verified: true, name: 'Bob' },
    ],
    scopes: [...ALL_SCOPES],
  });
}

export async function buildConnectApp(
  t: Test,
  databaseUrl: string,
  op: OidcTestServer,
  extra: Record<string, string> = {},
) {
  return buildTestApp(t, databaseUrl, {
    PARTNER_ISSUER: op.issuer,
    PARTNER_CLIENT_ID: CONNECT_CLIENT,
    PARTNER_CLIENT_SECRET: CONNECT_SECRET,
    PARTNER_CONNECT_REDIRECT_URI: CONNECT_REDIRECT,
    LOG_LEVEL: 'debug',
    ...extra,
  });
}

type Api = Awaited<ReturnType<typeof buildTestApp>>;

export type Started = { flowId: string; authorizationUrl: string; cookie: string; scope: string };

/** POST /oauth/partner/start as the member; the flow's cookie is kept for the callback. */
export async function startConnect(api: Api, member: Member, services?: string[]): Promise<Started> {
  const res = await api.app.inject({
    method: 'POST',
    url: '/oauth/partner/start',
    headers: { authorization: `Bearer ${member.token}`, 'x-tenant-id': member.tenantId },
    payload: services ? { services } : {},
  });
  if (res.statusCode !== 200) throw new Error(`start: ${res.statusCode} ${res.body}`);
  const cookie = String(res.headers['set-cookie']).split(';')[0]!;
  return { ...res.json(), cookie };
}

/** The person at the provider: signs in as accountId (or denies); returns the callback path our app gets. */
export async function authorizeAt(
  op: OidcTestServer,
  started: Started,
  outcome: { accountId: string } | { deny: true },
): Promise<string> {
  op.next = outcome;
  const params = Object.fromEntries(new URL(started.authorizationUrl).searchParams);
  const out = await op.authorize(params);
  if (out.kind !== 'redirect') throw new Error('expected a redirect back');
  return `${out.location.pathname}${out.location.search}`;
}

export async function callback(api: Api, path: string, cookie: string, accept = 'text/html') {
  return api.app.inject({ method: 'GET', url: path, headers: { cookie, accept } });
}

/** Start → authorize → callback; returns the flow id and the callback answer. */
export async function connect(api: Api, op: OidcTestServer, member: Member, accountId: string, services?: string[]) {
  const started = await startConnect(api, member, services);
  const path = await authorizeAt(op, started, { accountId });
  const res = await callback(api, path, started.cookie);
  return { started, res, path };
}

export { createMember };
