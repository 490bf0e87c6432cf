// The attempts the isolation suite makes on one operation: as another
// tenant B with A's ids (B's own tenant header), as B naming A's tenant in
// x-tenant-id, and as A's Viewer on changes. Each answer is judged: the
// status expected, none of A's values in the body, none of A's rows changed.
import type { FastifyInstance } from 'fastify';
import { signRequest } from '../../api/plugins/hmac-signature.ts';
import type { Fingerprint } from '../helpers/db-fingerprint.ts';
import { UPSTREAM_ANSWERS, type Operation } from '../helpers/openapi-ops.ts';
import { authFor, type Person, type Workspace } from '../helpers/principals.ts';
import { toRequest, validParts } from '../fuzz/generate.ts';
import { describe } from '../fuzz/runner.ts';
import type { Resources } from './fixtures.ts';

export type Attempt = { who: string; expect: number[] | null; status: number; validation: boolean; problems: string[] };
type Watch = { take: () => Promise<Fingerprint>; changed: (a: Fingerprint, b: Fingerprint) => string[] };

/** Parameters that name something inside the caller's own tenant (not an id of A's): B acting on its own is fine. */
export const NAME_PARAMS = new Set(['provider', 'filename', 'channel']);

export function createAttempts(app: FastifyInstance, resources: Resources, watch: Watch, seed: number) {
  let n = 0;
  /** A request refused by its own validation (a generated body a refine turned down) is tried again with the next seed. */
  async function attempt(
    op: Operation,
    who: string,
    caller: Workspace,
    person: Person,
    tenantHeader: string | null,
    pathValues: Record<string, string>,
    expect: number[] | null,
  ): Promise<Attempt> {
    let result = await once(op, who, caller, person, tenantHeader, pathValues, expect);
    for (let i = 0; i < 4 && result.status === 400 && result.validation; i++)
      result = await once(op, who, caller, person, tenantHeader, pathValues, expect);
    // Still refused by validation: it never reached A's data, which is all this suite asks.
    if (result.status === 400 && result.validation)
      result.problems = result.problems.filter((p) => !p.startsWith('expected'));
    return result;
  }

  async function once(
    op: Operation,
    who: string,
    caller: Workspace,
    person: Person,
    tenantHeader: string | null,
    pathValues: Record<string, string>,
    expect: number[] | null,
  ) {
    const parts = validParts(op, seed + n++, { tenantId: tenantHeader ?? caller.tenantId, ids: {} }, false);
    parts.path = { ...parts.path, ...pathValues };
    for (const p of op.params)
      if (p.in === 'query' && resources.byParam[p.name]) parts.query[p.name] = resources.byParam[p.name]!;
    if (parts.body && typeof parts.body === 'object' && !Array.isArray(parts.body)) {
      // Body fields that name A's resources get A's ids.
      const body = parts.body as Record<string, unknown>;
      for (const key of Object.keys(body)) if (resources.byParam[key]) body[key] = resources.byParam[key];
    }
    if (tenantHeader === null) delete parts.headers['x-tenant-id'];
    else if (op.params.some((p) => p.name === 'x-tenant-id')) parts.headers['x-tenant-id'] = tenantHeader;
    const request = toRequest(op, who, false, parts);
    const headers = { ...authFor(op.security, caller, person), ...request.headers };
    if (op.params.some((p) => p.name === 'x-signature')) {
      const key = (
        await app.inject({
          url: '/api/provider-keys/signing-key',
          headers: { authorization: `Bearer ${person.token}` },
        })
      ).json().signingKey;
      Object.assign(headers, signRequest(key, op.method, request.url, tenantHeader ?? '', request.payload ?? ''));
    }
    const before = await watch.take();
    const res = await app.inject({
      method: op.method as 'GET',
      url: request.url,
      headers,
      ...(request.payload !== undefined ? { payload: request.payload } : {}),
    });
    const changed = watch.changed(before, await watch.take());
    const problems: string[] = [];
    if (expect && !expect.includes(res.statusCode))
      problems.push(`expected ${expect.join(' or ')}, got ${res.statusCode}`);
    const upstream = UPSTREAM_ANSWERS[op.id];
    if (
      res.statusCode >= 500 &&
      !(upstream?.status === res.statusCode && res.body.includes(`"error":"${upstream.code}"`))
    )
      problems.push(`server error ${res.statusCode}`);
    const leaked = resources.secrets.filter(
      (s) => res.body.includes(s) && !request.url.includes(s) && !(request.payload ?? '').includes(s),
    );
    if (leaked.length) problems.push(`answer holds A's ${leaked.join(', ')}`);
    if (changed.length) problems.push(`changed A's rows in ${changed.join(', ')}`);
    const validation =
      res.statusCode === 400 && /"path":"(body|query)\.|"message":"Invalid request: (body|query)\./.test(res.body);
    return {
      who,
      expect,
      status: res.statusCode,
      validation,
      problems: problems.map((p) => `${p}\n${describe({ ...request, headers }, res.statusCode, res.body)}`),
    };
  }
  return attempt;
}
