// Requests for one operation of /openapi.json: valid ones from its schemas
// (json-schema-faker) and invalid ones of named kinds (values from
// fast-check), all reproducible from one seed. A `strict` request must be
// refused with a 4xx; the others only must not fail the server.
import fc from 'fast-check';
import { generateSync } from 'json-schema-faker';
import type { JsonSchema, Operation } from '../helpers/openapi-ops.ts';
import { urlOf } from '../helpers/openapi-ops.ts';

export type Parts = {
  path: Record<string, string>;
  query: Record<string, string>;
  headers: Record<string, string>;
  body: unknown;
};
export type FuzzRequest = {
  kind: string;
  strict: boolean;
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string;
  /** No authorization header is added (the kind is about authentication). */
  noAuth?: boolean;
};

/** A stable 31-bit seed per operation and purpose. */
export function seedOf(seed: number, ...parts: string[]): number {
  let h = seed | 0;
  for (const ch of parts.join('|')) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
  return h & 0x7fffffff;
}

const asString = (v: unknown) =>
  typeof v === 'string'
    ? v
    : v === undefined || v === null
      ? ''
      : typeof v === 'object'
        ? JSON.stringify(v)
        : String(v);
const fake = (schema: JsonSchema, seed: number) => {
  try {
    return generateSync(schema as never, { seed, maxLength: 40, maxItems: 3, optionalsProbability: 0.5, maxDepth: 4 });
  } catch {
    return undefined;
  }
};

/** Values the schemas cannot guess (real ids, the caller's tenant) are supplied by the caller. */
export type Known = { tenantId: string; ids: Record<string, string[]> };

export function validParts(op: Operation, seed: number, known: Known, useKnown: boolean): Parts {
  const parts: Parts = { path: {}, query: {}, headers: {}, body: undefined };
  for (const p of op.params) {
    if (!p.required && p.in !== 'path' && fake({ type: 'boolean' }, seedOf(seed, p.name)) === false) continue;
    let value = asString(fake(p.schema, seedOf(seed, p.in, p.name)));
    const ids = known.ids[p.name];
    if (useKnown && ids?.length) value = ids[seed % ids.length]!;
    if (p.name === 'x-tenant-id') value = known.tenantId;
    if (p.name === 'idempotency-key') value = `fuzz-${seed}-${Math.random().toString(36).slice(2, 10)}`;
    if (p.name === 'timeout') value = '0'; // a long poll: never wait in the fuzz run
    if (p.name.startsWith('x-signature')) continue; // signed by the runner
    parts[p.in === 'header' ? 'headers' : p.in][p.name] = value;
  }
  if (op.body) parts.body = fake(op.body.schema, seedOf(seed, 'body'));
  return parts;
}

export function toRequest(
  op: Operation,
  kind: string,
  strict: boolean,
  parts: Parts,
  over: Partial<FuzzRequest> = {},
): FuzzRequest {
  const json = op.body?.contentType === 'application/json' || !op.body;
  const payload =
    parts.body === undefined
      ? undefined
      : json
        ? JSON.stringify(parts.body)
        : new URLSearchParams(
            Object.entries((parts.body ?? {}) as object).map(([k, v]) => [k, asString(v)]),
          ).toString();
  const headers: Record<string, string> = {
    ...parts.headers,
    ...(payload !== undefined ? { 'content-type': op.body?.contentType ?? 'application/json' } : {}),
  };
  return {
    kind,
    strict,
    method: op.method,
    url: urlOf(op, parts.path, parts.query),
    headers,
    ...(payload !== undefined ? { payload } : {}),
    ...over,
  };
}

// --- the shapes of a schema the invalid kinds aim at ---------------------

const typesOf = (s: JsonSchema): Set<string> => {
  const out = new Set<string>();
  if (typeof s.type === 'string') out.add(s.type);
  if (Array.isArray(s.type)) for (const x of s.type) out.add(String(x));
  for (const alt of [...((s.anyOf as JsonSchema[]) ?? []), ...((s.oneOf as JsonSchema[]) ?? [])])
    for (const x of typesOf(alt)) out.add(x);
  if (s.const !== undefined || s.enum) out.add('enum');
  if (out.has('integer')) out.add('number');
  return out;
};
const objectSchema = (s: JsonSchema): JsonSchema | null =>
  s.type === 'object' && s.properties
    ? s
    : (((s.anyOf as JsonSchema[]) ?? []).find((a) => a.type === 'object' && a.properties) ?? null);
const props = (s: JsonSchema) => Object.entries((objectSchema(s)?.properties ?? {}) as Record<string, JsonSchema>);
const stringProps = (s: JsonSchema) => props(s).filter(([, p]) => typesOf(p).has('string'));
const numberProps = (s: JsonSchema) => props(s).filter(([, p]) => typesOf(p).has('number'));

/** A JSON value of a type the schema does not allow, or undefined when it allows every type. */
const VALUES_BY_TYPE: Array<[string, unknown]> = [
  ['string', 'x'],
  ['number', 12345],
  ['boolean', true],
  ['array', [1]],
  ['object', { a: 1 }],
  ['null', null],
];
function wrongValue(s: JsonSchema): unknown {
  const types = typesOf(s);
  if (types.size === 0 || types.has('enum')) return types.has('enum') ? '__not_in_enum__' : undefined;
  return VALUES_BY_TYPE.find(([t]) => !types.has(t) && !(t === 'number' && types.has('integer')))?.[1];
}

const sample = <T>(arb: fc.Arbitrary<T>, seed: number, n = 1) => fc.sample(arb, { seed, numRuns: n });
const nested = (depth: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? { n: v } : [v];
  return v;
};

/** Invalid requests of every kind that applies to the operation. */
export function invalidRequests(op: Operation, seed: number, base: Parts): FuzzRequest[] {
  const out: FuzzRequest[] = [];
  const add = (kind: string, strict: boolean, parts: Parts, over: Partial<FuzzRequest> = {}) =>
    out.push(toRequest(op, kind, strict, parts, over));
  const withBody = (body: unknown): Parts => ({ ...base, body });
  const s = (kind: string) => seedOf(seed, kind);
  const bodyObject =
    base.body && typeof base.body === 'object' && !Array.isArray(base.body)
      ? (base.body as Record<string, unknown>)
      : null;
  const schema = op.body?.schema ?? {};
  const isObject = schema.type === 'object';

  if (op.body && op.body.contentType === 'application/json') {
    for (const v of sample(
      fc.oneof(fc.integer(), fc.string(), fc.array(fc.integer(), { maxLength: 3 }), fc.boolean()),
      s('type'),
      2,
    ))
      add('body-wrong-type', isObject, withBody(v));
    for (const name of (objectSchema(schema)?.required as string[] | undefined) ?? []) {
      const { [name]: _gone, ...rest } = bodyObject ?? {};
      add('body-missing-field', isObject, withBody(rest));
    }
    const [extraKey, extraValue] = sample(
      fc.tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 2 })),
      s('extra'),
    )[0]!;
    add(
      'body-extra-field',
      schema.additionalProperties === false,
      withBody({ ...bodyObject, [`x_${extraKey}`]: extraValue }),
    );
    for (const [name, p] of props(schema)) {
      const wrong = wrongValue(p);
      if (wrong !== undefined) add('body-field-wrong-type', isObject, withBody({ ...bodyObject, [name]: wrong }));
    }
    for (const [name, p] of stringProps(schema).slice(0, 3)) {
      const size = sample(fc.integer({ min: 100_000, max: 200_000 }), s(`huge${name}`))[0]!;
      add(
        'body-huge-string',
        typeof p.maxLength === 'number' && p.maxLength < size,
        withBody({ ...bodyObject, [name]: 'x'.repeat(size) }),
      );
      add(
        'body-empty-string',
        typeof p.minLength === 'number' && p.minLength > 0,
        withBody({ ...bodyObject, [name]: '' }),
      );
      const [pre, post] = sample(
        fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })),
        s(`bad${name}`),
      )[0]!;
      add('body-nul-byte', true, withBody({ ...bodyObject, [name]: `${pre}\u0000${post}` }));
      add('body-lone-surrogate', true, withBody({ ...bodyObject, [name]: `${pre}\uD800${post}` }));
    }
    const deepKey = props(schema)[0]?.[0] ?? 'deep';
    add(
      'body-deep-nesting',
      true,
      withBody({ ...bodyObject, [deepKey]: nested(sample(fc.integer({ min: 70, max: 2000 }), s('deep'))[0]!) }),
    );
    for (const [name] of numberProps(schema)) {
      for (const n of sample(fc.constantFrom(-1, -1e308, 1e308, 2 ** 53 + 2, 0.5, -0.000001), s(`num${name}`), 2))
        add('body-number-extreme', false, withBody({ ...bodyObject, [name]: n }));
    }
    const broken = sample(
      fc.constantFrom('{', '{"a":', '[1,2', '{"a":1}}', 'nul', '"\\x"', '{a:1}', '\uFEFF{'),
      s('json'),
    )[0]!;
    add('invalid-json', true, base, {
      payload: broken,
      headers: { ...base.headers, 'content-type': 'application/json' },
    });
    const ct = sample(
      fc.constantFrom('text/xml', 'application/xml', 'multipart/form-data; boundary=x', 'application/octet-stream'),
      s('ct'),
    )[0]!;
    add('wrong-content-type', true, base, {
      payload: JSON.stringify(base.body ?? {}),
      headers: { ...base.headers, 'content-type': ct },
    });
    add('oversized-body', true, base, {
      payload: JSON.stringify({ pad: 'x'.repeat(1024 * 1024 + 10) }),
      headers: { ...base.headers, 'content-type': 'application/json' },
    });
  }

  for (const p of op.params.filter((x) => x.in === 'path')) {
    const junk = sample(fc.string({ unit: 'binary', maxLength: 30 }), s(`junk${p.name}`))[0]!;
    const enc = (value: string) => ({ ...base, path: { ...base.path, [p.name]: value } });
    add('path-overlong', true, enc('a'.repeat(sample(fc.integer({ min: 9_000, max: 20_000 }), s('long'))[0]!)));
    add('path-junk', false, enc(junk));
    const raw = (value: string) =>
      toRequest(op, '', true, base).url.replace(encodeURIComponent(base.path[p.name] ?? 'x'), value);
    for (const bad of sample(
      fc.constantFrom('%E0%A4%A', '%ZZ', '%', '%ED%A0%80', '%00', 'a%00b', '%C0%AF'),
      s(`pct${p.name}`),
      2,
    )) {
      out.push({ ...toRequest(op, 'path-bad-encoding', true, base), url: raw(bad) });
    }
  }

  for (const p of op.params.filter((x) => x.in === 'query')) {
    const q = (value: string) => ({ ...base, query: { ...base.query, [p.name]: value } });
    const types = typesOf(p.schema);
    if (types.has('number') || types.has('enum')) add('query-wrong-type', true, q('not-a-number-or-enum'));
    if (types.has('number'))
      for (const n of sample(
        fc.constantFrom('-1', '1e309', '99999999999999999999', '1.5', '0x10', ''),
        s(`qn${p.name}`),
        2,
      ))
        add('query-number-extreme', false, q(n));
    if (p.name === 'cursor') {
      const crafted = fc.oneof(
        fc.string({ maxLength: 40 }),
        fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
        fc.tuple(fc.string(), fc.string()).map(([a, b]) => Buffer.from(`${a}|${b}`).toString('base64url')),
        fc.constant('x'.repeat(10_000)),
        fc.constant("1' or '1'='1"),
      );
      for (const c of sample(crafted, s('cursor'), 4)) add('crafted-cursor', false, q(c));
    }
    add('query-nul', false, q('a\u0000b'));
  }
  add('query-extra', false, { ...base, query: { ...base.query, unexpected_param: 'x' } });

  if (op.security.length) {
    add('auth-missing', true, base, { noAuth: true });
    add('auth-garbage', true, base, {
      noAuth: true,
      headers: {
        ...toRequest(op, '', true, base).headers,
        authorization: `Bearer ${sample(fc.string({ maxLength: 40 }), s('tok'))[0]!.replace(/[^\x21-\x7e]/g, 'x')}`,
      },
    });
  }
  const tenant = op.params.find((p) => p.name === 'x-tenant-id');
  if (tenant) {
    add('tenant-not-uuid', true, { ...base, headers: { ...base.headers, 'x-tenant-id': 'not-a-uuid' } });
    add('tenant-unknown', true, {
      ...base,
      headers: { ...base.headers, 'x-tenant-id': sample(fc.uuid({ version: 4 }), s('tenant'))[0]! },
    });
  }
  if (op.params.some((p) => p.name === 'idempotency-key' && p.required)) {
    const { 'idempotency-key': _k, ...rest } = base.headers;
    add('idempotency-key-missing', true, { ...base, headers: rest });
  }
  return out;
}
