// Sends generated requests and judges each answer: no 5xx, no hang, every
// error in its surface's shape, strict kinds refused with a 4xx, and nothing
// written by a refused request (database fingerprints around it).
import type { FastifyInstance } from 'fastify';
import { signRequest } from '../../api/plugins/hmac-signature.ts';
import { AgentApiError, IdentityError, PlatformError, surfaceOf } from '../../api/errors.ts';
import type { Fingerprint } from '../helpers/db-fingerprint.ts';
import type { FuzzRequest } from './generate.ts';

/** status 0: no answer, or (with `setLevel`) a problem of the whole set rather than one request. */
export type Verdict = { request: FuzzRequest; status: number; problems: string[]; setLevel?: boolean };
export type Fingerprints = { take: () => Promise<Fingerprint>; changed: (a: Fingerprint, b: Fingerprint) => string[] };

const TIMEOUT_MS = 10_000;

/** The request as a failure message shows it (long values cut, tokens hidden). */
export function describe(r: FuzzRequest, status?: number, body?: string): string {
  const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}... (${s.length} chars)` : s);
  const headers = Object.fromEntries(
    Object.entries(r.headers).map(([k, v]) => [k, k === 'authorization' ? `${v.slice(0, 12)}...` : cut(v, 80)]),
  );
  return [
    `[${r.kind}${r.strict ? ', must be refused' : ''}] ${r.method} ${cut(r.url, 300)}`,
    `  headers: ${JSON.stringify(headers)}`,
    r.payload !== undefined ? `  body: ${cut(JSON.stringify(r.payload), 400)}` : '',
    status !== undefined ? `  -> ${status} ${cut(body ?? '', 400)}` : '',
  ]
    .filter(Boolean)
    .join('\n');
}

/** What is wrong with an error body for the URL's surface, or null. */
export function shapeProblem(url: string, status: number, contentType: string, body: string): string | null {
  if (!contentType.startsWith('application/json')) return `error answered as ${contentType || 'no content type'}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return 'error body is not JSON';
  }
  const surface = surfaceOf(url);
  const schema = surface === 'agent' ? AgentApiError : surface === 'identity' ? IdentityError : PlatformError;
  const result = schema.safeParse(parsed);
  if (!result.success)
    return `not a ${surface} error body: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
  if (surface === 'platform' && (parsed as { status: number }).status !== status)
    return `platform error body says status ${(parsed as { status: number }).status}`;
  return null;
}

export function createRunner(app: FastifyInstance, fingerprints: Fingerprints) {
  let ip = 0;
  async function send(r: FuzzRequest, auth: Record<string, string>, signingKey?: { key: string; tenantId: string }) {
    const headers = { ...(r.noAuth ? {} : auth), ...r.headers };
    if (signingKey)
      Object.assign(headers, signRequest(signingKey.key, r.method, r.url, signingKey.tenantId, r.payload ?? ''));
    // Each request from its own address, so per-IP limits do not hide the routes behind 429s.
    const remoteAddress = `10.${(++ip >> 16) & 255}.${(ip >> 8) & 255}.${ip & 255}`;
    const injected = app.inject({
      method: r.method as 'GET',
      url: r.url,
      headers,
      remoteAddress,
      ...(r.payload !== undefined ? { payload: r.payload } : {}),
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), TIMEOUT_MS)));
    try {
      return await Promise.race([injected, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Runs one operation's requests in order. Mutations are fingerprinted
   * around each refused request; reads around the whole set (a read writes nothing).
   */
  async function run(
    requests: FuzzRequest[],
    auth: Record<string, string>,
    options: { signingKey?: { key: string; tenantId: string }; upstream?: { status: number; code: string } } = {},
  ): Promise<Verdict[]> {
    const verdicts: Verdict[] = [];
    let before = await fingerprints.take();
    const readOnly = requests.every((r) => r.method === 'GET');
    for (const request of requests) {
      const res = await send(request, auth, options.signingKey);
      const problems: string[] = [];
      if (!res) {
        verdicts.push({ request, status: 0, problems: [`no answer within ${TIMEOUT_MS} ms`] });
        continue;
      }
      const status = res.statusCode;
      const upstream =
        options.upstream &&
        status === options.upstream.status &&
        res.body.includes(`"error":"${options.upstream.code}"`);
      if (status >= 500 && !upstream) problems.push(`server error ${status}`);
      if (status >= 400) {
        const shape = shapeProblem(request.url, status, String(res.headers['content-type'] ?? ''), res.body);
        if (shape) problems.push(shape);
      }
      if (request.strict && (status < 400 || (status >= 500 && !upstream)))
        problems.push(`expected a 4xx refusal, got ${status}`);
      if (!readOnly) {
        const after = await fingerprints.take();
        const written = fingerprints.changed(before, after);
        if (status >= 400 && written.length) problems.push(`refused, yet wrote to ${written.join(', ')}`);
        before = after;
      }
      verdicts.push({ request, status, problems: problems.map((p) => `${p}\n${describe(request, status, res.body)}`) });
    }
    if (readOnly) {
      const written = fingerprints.changed(before, await fingerprints.take());
      if (written.length)
        verdicts.push({
          request: requests[0]!,
          status: 0,
          setLevel: true,
          problems: [`reads wrote to ${written.join(', ')}\n${describe(requests[0]!)}`],
        });
    }
    return verdicts;
  }
  return { run };
}
