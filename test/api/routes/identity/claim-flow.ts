// Shared steps of the claim tests: registrations made directly, the agent's
// JSON calls, and a browser that drives the claim page over HTTP as a person
// would (cookie jar, CSRF token read from the form, code read from the page).
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { createRegistration } from '../../../../core/identity/registrations.ts';
import type { DatabasePool } from '../../../../core/db/pool.ts';

export const PASSWORD = 'correct horse battery staple';
export const CODE = /class="code">([BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4})</;

export async function register(db: DatabasePool, type: 'anonymous' | 'service_auth', loginHint?: string) {
  return createRegistration(db, { type, loginHint, ip: '10.9.0.1', claimTokenTtlS: 3600 });
}

export function agent(app: FastifyInstance) {
  return {
    claim: (claimToken: string, loginHint: string) =>
      app.inject({
        method: 'POST',
        url: '/agent/identity/claim',
        payload: { type: 'service_auth', claim_token: claimToken, login_hint: loginHint },
      }),
    complete: (claimToken: string, userCode: string) =>
      app.inject({
        method: 'POST',
        url: '/agent/identity/claim/complete',
        payload: { claim_token: claimToken, user_code: userCode },
      }),
    /** The RFC 7523 JWT-bearer grant: an assertion for an access token to `resource`. */
    exchange: (assertion: string, resource: string) =>
      app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
          assertion,
          resource,
        }).toString(),
      }),
  };
}

/** The verification page's path from a /claim response (the URI is absolute on {auth_url}). */
export const pagePath = (res: LightMyRequestResponse) =>
  new URL(res.json().attempt.verification_uri as string).pathname;

export const csrfOf = (res: LightMyRequestResponse) => /name="csrf" value="([^"]+)"/.exec(res.body)?.[1] ?? '';

let nextIp = 1;

export class Browser {
  cookie = '';
  readonly ip = `10.50.${Math.floor(nextIp / 250)}.${nextIp++ % 250}`;
  constructor(
    readonly app: FastifyInstance,
    public path: string,
  ) {}

  private keep(res: LightMyRequestResponse) {
    const set = res.headers['set-cookie'];
    for (const line of Array.isArray(set) ? set : set ? [set] : []) {
      const pair = line.split(';')[0]!;
      if (pair.startsWith('claim_session=')) this.cookie = pair;
    }
    return res;
  }

  async get(path = this.path) {
    return this.keep(
      await this.app.inject({
        method: 'GET',
        url: path,
        headers: this.cookie ? { cookie: this.cookie } : {},
        remoteAddress: this.ip,
      }),
    );
  }

  async post(fields: Record<string, string>, path = this.path) {
    return this.keep(
      await this.app.inject({
        method: 'POST',
        url: path,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...(this.cookie ? { cookie: this.cookie } : {}),
        },
        payload: new URLSearchParams(fields).toString(),
        remoteAddress: this.ip,
      }),
    );
  }

  /** Opens the page and submits the sign-in form with the CSRF token it carries. */
  async signIn(email: string, password = PASSWORD) {
    const page = await this.get();
    return this.post({ action: 'signin', csrf: csrfOf(page), email, password });
  }

  /** Opens the (signed-in) page and presses a button; extra fields such as organization_id. */
  async press(action: 'confirm' | 'deny' | 'organization', extra: Record<string, string> = {}) {
    const page = await this.get();
    return this.post({ action, csrf: csrfOf(page), ...extra });
  }

  async confirm(extra: Record<string, string> = {}) {
    const res = await this.press('confirm', extra);
    return { res, code: CODE.exec(res.body)?.[1] ?? '' };
  }
}

/** Registration -> /claim -> sign-in -> confirm: the code the person reads. */
export async function confirmedClaim(
  app: FastifyInstance,
  db: DatabasePool,
  email: string,
  options: { type?: 'anonymous' | 'service_auth'; organization?: string } = {},
) {
  const type = options.type ?? 'service_auth';
  const reg = await register(db, type, type === 'service_auth' ? email : undefined);
  const started = await agent(app).claim(reg.claimToken, email);
  if (started.statusCode !== 200) throw new Error(`claim failed: ${started.body}`);
  const browser = new Browser(app, pagePath(started));
  const signedIn = await browser.signIn(email);
  if (signedIn.statusCode !== 303) throw new Error(`sign-in failed: ${signedIn.statusCode} ${signedIn.body}`);
  const { res, code } = await browser.confirm(options.organization ? { organization_id: options.organization } : {});
  if (!code) throw new Error(`confirm failed: ${res.statusCode} ${res.body}`);
  return { reg, started, browser, code, attemptId: started.json().attempt.id as string };
}
