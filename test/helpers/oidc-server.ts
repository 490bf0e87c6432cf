// A real OpenID Connect provider for tests: panva's oidc-provider on
// loopback, with accounts and interaction outcomes the test controls, and a
// small "browser" that walks an authorization request through it (cookies,
// redirects, the form_post page) the way a person's browser would.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload } from 'jose';
import Provider, { type ClientMetadata } from 'oidc-provider';
import type { Test } from 'tap';

export type OidcAccount = { sub: string; email?: string; email_verified?: boolean; name?: string };

/** What the next interaction does: sign in as an account (and consent), or deny. */
export type NextOutcome = { accountId: string } | { deny: true };

export type RecordedRequest = { method: string; path: string; body: string };

export type OidcTestServer = {
  issuer: string;
  accounts: Map<string, OidcAccount>;
  next: NextOutcome;
  /** Requests the provider received (path without query), newest last. */
  requests: RecordedRequest[];
  /** Answer the next n requests to this path with this status (e.g. 503 on /token/revocation). */
  failNext: (path: string, status: number, times?: number) => void;
  /** The provider's signing key, for tokens a test crafts (expired, wrong audience). */
  privateJwk: JWK;
  sign: (claims: JWTPayload, options?: { key?: JWK; alg?: string; kid?: string }) => Promise<string>;
  /** Runs an authorization request through the provider like a browser. */
  authorize: (params: Record<string, string>) => Promise<AuthorizationOutcome>;
  close: () => Promise<void>;
};

/** Where the provider sent the browser back: a redirect, or a form_post page's fields. */
export type AuthorizationOutcome =
  | { kind: 'redirect'; location: URL }
  | { kind: 'form_post'; action: string; fields: Record<string, string> };

export async function startOidcServer(
  t: Test,
  options: { clients: ClientMetadata[]; accounts?: OidcAccount[]; scopes?: string[] },
): Promise<OidcTestServer> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const privateJwk = { ...(await exportJWK(privateKey)), kid: 'test-key-1', alg: 'RS256', use: 'sig' };
  const accounts = new Map((options.accounts ?? []).map((a) => [a.sub, a]));
  const requests: RecordedRequest[] = [];
  const failures = new Map<string, { status: number; times: number }>();

  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const provider = new Provider(issuer, {
    clients: options.clients,
    jwks: { keys: [privateJwk] },
    cookies: { keys: ['oidc-test-cookie-key-0123456789abcdef'] },
    scopes: ['openid', 'email', 'profile', 'offline_access', ...(options.scopes ?? [])],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true, allowedPolicy: async (_ctx, client) => client.clientAuthMethod !== 'none' },
      revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
    },
    // Refresh tokens for confidential clients that ask for offline_access.
    issueRefreshToken: async (_ctx, client, code) =>
      client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access'),
    findAccount: async (_ctx, sub) => {
      const account = accounts.get(sub);
      if (!account) return undefined;
      return { accountId: sub, claims: async () => ({ ...account }) };
    },
    // The ID token carries the e-mail claims too (as the providers we stand in for do).
    conformIdTokenClaims: false,
    ttl: {
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
      AccessToken: 600,
      IdToken: 600,
      AuthorizationCode: 60,
      RefreshToken: 86_400,
      ClientCredentials: 600,
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError: async (ctx, out) => {
      ctx.type = 'application/json';
      ctx.body = out;
    },
  });
  // Rejections the provider answers itself are not test failures.
  provider.on('server_error', (_ctx, error) => console.error('oidc-provider server_error', error));

  const state: { next: NextOutcome } = { next: { deny: true } };
  const handler = provider.callback();

  async function interaction(req: IncomingMessage, res: ServerResponse) {
    const details = await provider.interactionDetails(req, res);
    const next = state.next;
    if ('deny' in next) {
      await provider.interactionFinished(
        req,
        res,
        { error: 'access_denied', error_description: 'The person declined.' },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    const clientId = String(details.params.client_id);
    const grant = details.grantId
      ? (await provider.Grant.find(details.grantId))!
      : new provider.Grant({ accountId: next.accountId, clientId });
    grant.addOIDCScope(String(details.params.scope ?? 'openid'));
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: next.accountId }, consent: { grantId } },
      { mergeWithLastSubmission: true },
    );
  }

  server.on('request', (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => requests.push({ method: req.method ?? 'GET', path, body }));
    const failure = failures.get(path);
    if (failure && failure.times > 0) {
      failure.times -= 1;
      req.resume();
      res
        .writeHead(failure.status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: 'server_error' }));
      return;
    }
    if (path.startsWith('/interaction/')) {
      interaction(req, res).catch((error) => {
        res.writeHead(500).end(String(error));
      });
      return;
    }
    handler(req, res);
  });

  // Each authorization in a fresh browser: nobody is signed in at the provider yet.
  const authorize = async (params: Record<string, string>): Promise<AuthorizationOutcome> => {
    const browser = cookieBrowser();
    let url = new URL('/auth', issuer);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    for (let hop = 0; hop < 10; hop++) {
      const res = await browser.get(url);
      if (res.status >= 300 && res.status < 400) {
        const location = new URL(res.headers.get('location')!, url);
        if (location.origin !== issuer) return { kind: 'redirect', location };
        url = location;
        continue;
      }
      const html = await res.text();
      // An error is posted back too (with a 400 status on the page itself).
      if (/<form[^>]*method="post"/i.test(html)) return { kind: 'form_post', ...parseForm(html) };
      throw new Error(`authorization stopped at ${url} with ${res.status}: ${html.slice(0, 500)}`);
    }
    throw new Error('too many redirects');
  };

  const close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(close);

  return {
    issuer,
    accounts,
    get next() {
      return state.next;
    },
    set next(value: NextOutcome) {
      state.next = value;
    },
    requests,
    failNext: (path, status, times = 1) => failures.set(path, { status, times }),
    privateJwk,
    sign: async (claims, signOptions = {}) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: signOptions.alg ?? 'RS256', kid: signOptions.kid ?? privateJwk.kid, typ: 'JWT' })
        .sign(await importKey(signOptions.key ?? privateJwk)),
    authorize,
    close,
  };
}

async function importKey(jwk: JWK) {
  const { importJWK } = await import('jose');
  return importJWK(jwk, jwk.alg ?? 'RS256');
}

/** The action and hidden inputs of the provider's auto-submitting form_post page. */
function parseForm(html: string): { action: string; fields: Record<string, string> } {
  const action = /<form[^>]*action="([^"]+)"/i.exec(html)?.[1];
  if (!action) throw new Error('form without action');
  const fields: Record<string, string> = {};
  for (const input of html.matchAll(/<input[^>]*>/gi)) {
    const name = /name="([^"]*)"/.exec(input[0])?.[1];
    const value = /value="([^"]*)"/.exec(input[0])?.[1] ?? '';
    if (name) fields[name] = decodeEntities(value);
  }
  return { action: decodeEntities(action), fields };
}

const decodeEntities = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;|&#x27;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** fetch with a cookie jar for one origin, redirects handled by the caller. */
export function cookieBrowser() {
  const jar = new Map<string, string>();
  const remember = (res: Response) => {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(line)) jar.delete(name);
      else jar.set(name, value);
    }
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    jar,
    async get(url: URL) {
      const res = await fetch(url, { redirect: 'manual', headers: { cookie: cookie() } });
      remember(res);
      return res;
    },
    async postForm(url: string | URL, fields: Record<string, string>) {
      const res = await fetch(url, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
      remember(res);
      return res;
    },
  };
}
