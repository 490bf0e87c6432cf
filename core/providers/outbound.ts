// The outbound policy for provider base URLs a tenant chose. The operator's
// own endpoints (OPENAI_BASE_URL ... OLLAMA_BASE_URL) are trusted as configured; a tenant's
// URL must be http(s), carry no credentials and lead to a public address,
// unless PROVIDER_ALLOW_PRIVATE_URLS is on. It is checked twice: when saved
// (a clear 400) and at every connection, after DNS, so a name that resolves
// publicly at save time and privately later (DNS rebinding) still never
// reaches a private address.
//
// Enforcement needs connections that use our own DNS lookup: model calls go
// through an undici Agent with a checking connector (dispatcherFor), and the
// webhook channel through a fetch on such an Agent (guardedFetch), since
// Node's global fetch accepts no lookup.
import { lookup as dnsLookup } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type * as Undici from 'undici';
import { lazyRequire } from '../lazy-require.ts';
import { classifyAddress, describeClass, type AddressClass } from './addresses.ts';

/** host:port of an outbound address, for log lines and messages: never its path, query or credentials. */
export function hostOf(url: string, fallback = 'the remote address'): string {
  try {
    return new URL(url).host;
  } catch {
    return fallback;
  }
}

/** A destination the policy refused; fetch keeps it as the cause of its TypeError. */
export class OutboundBlockedError extends Error {
  override name = 'OutboundBlockedError';
  readonly code = 'ERR_OUTBOUND_BLOCKED';
}

export type OutboundPolicy = {
  /** The operator's endpoint for this provider: always allowed. */
  trustedBaseUrl: string;
  /** PROVIDER_ALLOW_PRIVATE_URLS: tenants may point at private networks. */
  allowPrivateUrls?: boolean;
};

const bare = (hostname: string) => (hostname.startsWith('[') ? hostname.slice(1, -1) : hostname);
// RFC 6761: these names are loopback whatever a resolver says.
const isLocalhostName = (name: string) => /(^|\.)localhost\.?$/i.test(name);

/** What is wrong with the URL itself (scheme, credentials), or null. */
export function urlFormProblem(url: URL): string | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'it must be an http:// or https:// URL';
  if (url.username || url.password) return 'it must not contain a user name or password (send keys as the apiKey)';
  return null;
}

type Classify = (address: string) => AddressClass | null;

/** Why a resolved address may not be reached, or null. */
function addressProblem(host: string, address: string, classify: Classify = classifyAddress): string | null {
  const found = classify(address);
  if (!found) return null;
  return host === address
    ? `${address} is ${describeClass(found)}`
    : `${host} resolves to ${address}, ${describeClass(found)}`;
}

/** Literal IPs and localhost names are judged without DNS; undefined means a name to resolve. */
function hostProblemWithoutDns(host: string, classify: Classify = classifyAddress): string | null | undefined {
  if (isIP(host)) return addressProblem(host, host, classify);
  if (isLocalhostName(host)) return `${host} is a loopback name`;
  return undefined;
}

function resolveAll(host: string, timeoutMs: number, lookup: typeof dnsLookup): Promise<string[] | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), timeoutMs);
    lookup(host, { all: true }, (error, addresses) => {
      clearTimeout(timer);
      resolve(error ? null : addresses.map((a) => a.address));
    });
  });
}

/**
 * The save-time check of a tenant's base URL: the reason it is refused, or
 * null. A name that does not resolve (yet) passes: connections check again.
 */
export async function tenantBaseUrlProblem(
  raw: string,
  options: { allowPrivateUrls?: boolean; dnsTimeoutMs?: number; lookup?: typeof dnsLookup } = {},
): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'it is not a valid URL';
  }
  const form = urlFormProblem(url);
  if (form || options.allowPrivateUrls) return form;
  const host = bare(url.hostname);
  const direct = hostProblemWithoutDns(host);
  if (direct !== undefined) return direct;
  const addresses = (await resolveAll(host, options.dnsTimeoutMs ?? 3_000, options.lookup ?? dnsLookup)) ?? [];
  for (const address of addresses) {
    const problem = addressProblem(host, address);
    if (problem) return problem;
  }
  return null;
}

/** Seams for tests: the resolver and the classification (defaults: dns.lookup, classifyAddress). */
export type Guard = { lookup?: typeof dnsLookup; classify?: Classify };

/**
 * Resolves like dns.lookup, but fails when any address of the name is not
 * public: one private record among public ones is refused too, since the
 * socket may pick any of them.
 */
function guardedLookup({ lookup = dnsLookup, classify = classifyAddress }: Guard): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      for (const { address } of addresses) {
        const problem = addressProblem(hostname, address, classify);
        if (problem) return callback(new OutboundBlockedError(problem), '', 0);
      }
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
      if (options.all) (callback as unknown as (e: null, a: typeof addresses) => void)(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

type Agent = Undici.Agent;
/** undici, loaded at the first outbound call. */
export const undici = lazyRequire<typeof Undici>('undici');

/** A pooled Agent whose connector refuses what the policy refuses. */
export function createGuardedDispatcher(guard: Guard = {}): Agent {
  const { Agent, buildConnector } = undici();
  const connect = buildConnector({ lookup: guardedLookup(guard) });
  return new Agent({
    connect: (options, callback) => {
      // Node skips `lookup` for literal IPs (and a redirect may name one), so check them here.
      const problem = hostProblemWithoutDns(bare(options.hostname), guard.classify);
      if (problem) return callback(new OutboundBlockedError(problem), null);
      connect(options, callback);
    },
  });
}

/** undici's fetch over a guarded Agent (made at first use), for the webhook channel. */
export function createGuardedFetch(guard: Guard = {}): typeof fetch {
  let agent: Agent | undefined;
  return async (input, init) => {
    if (typeof input !== 'string' && !(input instanceof URL))
      throw new TypeError('the guarded fetch takes a URL, not a Request');
    const form = urlFormProblem(new URL(input));
    if (form) throw new OutboundBlockedError(`the provider URL is refused: ${form}`);
    agent ??= createGuardedDispatcher(guard);
    // undici's RequestInit and Response are the global ones under other type names.
    const response = await undici().fetch(input, { ...(init as object), dispatcher: agent });
    return response as unknown as Response;
  };
}

/** The one guarded fetch its callers share (one connection pool). */
export const guardedFetch = createGuardedFetch();

let guardedAgent: Agent | undefined;
let plainAgent: Agent | undefined;

/**
 * The connection pool a model call to `baseUrl` goes through
 * (stream-request.ts): a guarded one when the policy applies to it, else a
 * plain one (each made at first use, shared by every call).
 */
export function dispatcherFor(baseUrl: string, policy: OutboundPolicy): Agent {
  if (policy.allowPrivateUrls || baseUrl === policy.trustedBaseUrl) {
    plainAgent ??= new (undici().Agent)({ keepAliveTimeout: 30_000 });
    return plainAgent;
  }
  const form = urlFormProblem(new URL(baseUrl));
  if (form) throw new OutboundBlockedError(`the provider URL is refused: ${form}`);
  guardedAgent ??= createGuardedDispatcher();
  return guardedAgent;
}

/** The policy refusal somewhere in an error's cause chain (fetch's TypeError -> ours). */
export function blockedCause(error: unknown): OutboundBlockedError | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof OutboundBlockedError) return e;
  }
  return undefined;
}
