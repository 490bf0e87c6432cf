// altidp's redirect login keeps everything server-side: the flow row holds
// the state (hashed), the nonce, the PKCE verifier (sealed) and where to go
// afterwards, bound to the starting browser by a cookie (hashed). The
// callback takes the flow once; its result is a ticket (hashed, ~60 s,
// single use) that the page at `next` trades for a session.
import { z } from 'zod';
import * as oidc from 'openid-client';
import type { Keyring } from '../crypto/keyring.ts';
import { constantTimeEqual, randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const FLOW_TTL_S = 600;
export const TICKET_TTL_S = 60;
export type LoginMode = 'signin' | 'onboarding';

const aad = (stateHash: string) => `altidp-flow|${stateHash}`;

export type StartedFlow = { state: string; nonce: string; codeChallenge: string };

export async function startAltidpFlow(
  db: CommonQueryMethods,
  keyring: Keyring,
  input: { mode: LoginMode; nextPath: string; browserToken: string },
): Promise<StartedFlow> {
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const verifier = oidc.randomPKCECodeVerifier();
  const stateHash = sha256(state);
  await db.query(sql.unsafe`
    insert into external_login_flows (provider, state_hash, browser_hash, nonce, code_verifier_sealed, mode, next_path, expires_at)
    values ('altidp', ${stateHash}, ${sha256(input.browserToken)}, ${nonce}, ${keyring.sealPacked(verifier, aad(stateHash))},
            ${input.mode}, ${input.nextPath}, now() + make_interval(secs => ${FLOW_TTL_S}))`);
  return { state, nonce, codeChallenge: await oidc.calculatePKCECodeChallenge(verifier) };
}

const FlowRow = z.object({
  state_hash: z.string(),
  browser_hash: z.string(),
  nonce: z.string(),
  code_verifier_sealed: z.string(),
  mode: z.enum(['signin', 'onboarding']),
  next_path: z.string(),
});

export type TakenFlow = { nonce: string; codeVerifier: string; mode: LoginMode; nextPath: string };

/**
 * Takes the flow of this state once (a replayed or expired state gets null).
 * The flow is spent even when the browser does not match, so a stolen state
 * cannot be tried twice.
 */
export async function takeAltidpFlow(
  db: CommonQueryMethods,
  keyring: Keyring,
  state: string,
  browserToken: string | undefined,
): Promise<{ flow: TakenFlow } | { error: 'unknown_state' | 'other_browser' }> {
  const row = await db.maybeOne(sql.type(FlowRow)`
    update external_login_flows set used_at = now()
    where state_hash = ${sha256(state)} and used_at is null and expires_at > now()
    returning state_hash, browser_hash, nonce, code_verifier_sealed, mode, next_path`);
  if (!row) return { error: 'unknown_state' };
  if (!browserToken || !constantTimeEqual(sha256(browserToken), row.browser_hash)) return { error: 'other_browser' };
  return {
    flow: {
      nonce: row.nonce,
      codeVerifier: keyring.openPacked(row.code_verifier_sealed, aad(row.state_hash)),
      mode: row.mode,
      nextPath: row.next_path,
    },
  };
}

export async function createLoginTicket(
  db: CommonQueryMethods,
  input: { userId: string; mode: LoginMode; newUser: boolean },
): Promise<string> {
  const ticket = randomToken('alt_', 32);
  await db.query(sql.unsafe`
    insert into external_login_tickets (ticket_hash, user_id, provider, mode, new_user, expires_at)
    values (${sha256(ticket)}, ${input.userId}, 'altidp', ${input.mode}, ${input.newUser}, now() + make_interval(secs => ${TICKET_TTL_S}))`);
  return ticket;
}

const TicketRow = z.object({ user_id: z.string(), mode: z.enum(['signin', 'onboarding']), new_user: z.boolean() });

/** The ticket's login, once; a used, expired or unknown ticket gets null. */
export async function consumeLoginTicket(db: CommonQueryMethods, ticket: string) {
  return db.maybeOne(sql.type(TicketRow)`
    update external_login_tickets set used_at = now()
    where ticket_hash = ${sha256(ticket)} and used_at is null and expires_at > now()
    returning user_id, mode, new_user`);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: a control character in a path is refused on purpose
const UNSAFE_IN_PATH = /[\u0000-\u001f\u007f\\]/;

/**
 * `next` may only be a path on this service (no scheme, no host, no `//`),
 * so the login can never bounce the person to another site.
 */
export function safeNextPath(next: string | undefined, baseUrl: string): string | null {
  if (next === undefined || next === '') return '/';
  if (!next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\') || UNSAFE_IN_PATH.test(next))
    return null;
  const base = new URL(baseUrl);
  let resolved: URL;
  try {
    resolved = new URL(next, base);
  } catch {
    return null;
  }
  if (resolved.origin !== base.origin) return null;
  return `${resolved.pathname}${resolved.search}`;
}
