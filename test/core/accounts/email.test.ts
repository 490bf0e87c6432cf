// The canonical e-mail address: what it accepts and refuses, and that the
// TypeScript function and the SQL function canonical_email() agree (the
// login budget and the account lookup must never see two spellings of one
// address as two addresses).
import t from 'tap';
import { z } from 'zod';
import { canonicalEmail, sameEmail } from '../../../core/accounts/email.ts';
import { sql } from '../../../core/db/pool.ts';
import { createTestDatabase, testPool } from '../../helpers/db.ts';

const db = await testPool(t, await createTestDatabase(t));

const CASES: Array<[string, string | null]> = [
  ['iris@example.com', 'iris@example.com'],
  ['  Iris@Example.COM \t', 'iris@example.com'],
  ['\u0130ris@example.com', null], // İ: JavaScript lowercases it to i̇, PostgreSQL to i
  ['\u212Aris@example.com', 'kris@example.com'], // the Kelvin sign is canonically K
  ['stra\u00DFe@example.com', null], // ß
  ['\uFF49\uFF52\uFF49\uFF53@\uFF45xample.com', 'iris@example.com'], // fullwidth letters
  ['iris\uFF20example\uFF0Ecom', 'iris@example.com'], // fullwidth @ and dot
  ['\u{1D422}ris@example.com', null], // mathematical bold i: NFKC would make it i, but tables differ by version
  ['\uA7F1@example.com', null], // new in Unicode 17, which Node knows and PostgreSQL 18 does not
  ['iris@example.com.', null], // a trailing dot
  ['iris@.example.com', null],
  ['iris@example..com', null],
  ['iris@exa_mple.com', null],
  ['iris@exämple.com', null],
  ['iris\u0000@example.com', null],
  ['iris\u00A0@example.com', null], // a no-break space inside the address
  ['\u00A0iris@example.com\u3000', 'iris@example.com'], // and at the edges, trimmed
  ['\u200Biris@example.com', null], // zero-width space
  ['iris@example.com\u0307', null],
  ['ir is@example.com', null],
  ['@example.com', null],
  ['iris@', null],
  ['iris@@example.com', null],
  ['a@b@example.com', null],
  [`${'a'.repeat(64)}@example.com`, `${'a'.repeat(64)}@example.com`],
  [`${'a'.repeat(65)}@example.com`, null],
  [`a@${'b'.repeat(249)}.com`, `a@${'b'.repeat(249)}.com`],
  [`a@${'b'.repeat(250)}.com`, null],
  ['', null],
  ['O\u0027Brien+tag@Example.com', "o'brien+tag@example.com"],
  [`${' '.repeat(990)}iris@example.com`, null], // refused unread
];

const Row = z.object({ raw: z.string(), canonical: z.string().nullable() });

t.test('refuses what is ambiguous, and maps only fullwidth forms and the Kelvin sign', async (t) => {
  for (const [raw, expected] of CASES) t.equal(canonicalEmail(raw), expected, JSON.stringify(raw));
  t.ok(sameEmail('\u212Aris@example.com', 'KRIS@example.com'));
  t.notOk(sameEmail('\u0130ris@example.com', 'iris@example.com'));
  t.notOk(sameEmail('iris@example.com.', 'iris@example.com.'), 'a refused address is nobody');
  t.notOk(sameEmail(null, null));
});

t.test('SQL canonical_email() answers the same for the same cases', async (t) => {
  const rows = await db.any(sql.type(Row)`
    select raw, canonical_email(raw) as canonical from unnest(${sql.array(
      CASES.map(([raw]) => raw.replaceAll('\0', '\u0001')), // PostgreSQL text holds no NUL
      'text',
    )}::text[]) raw`);
  for (const row of rows) t.equal(row.canonical, canonicalEmail(row.raw), JSON.stringify(row.raw));
});

// Each code point in three places: in the local part, in the domain, and at
// both edges. Every code point of the Basic Multilingual Plane (where the
// mapped forms and all spaces live) and of plane 1 (mathematical letters,
// emoji); one in 61 of the other planes, which neither side maps.
const TEMPLATES = [
  { name: 'local part', js: (c: string) => `a${c}@example.com`, sql: sql.fragment`'a' || chr(cp) || '@example.com'` },
  { name: 'domain', js: (c: string) => `a@ex${c}ample.com`, sql: sql.fragment`'a@ex' || chr(cp) || 'ample.com'` },
  {
    name: 'edges',
    js: (c: string) => `${c}a@example.com${c}`,
    sql: sql.fragment`chr(cp) || 'a@example.com' || chr(cp)`,
  },
];
const codePoints = (from: number, to: number, step: number) =>
  Array.from({ length: Math.floor((to - from) / step) + 1 }, (_, i) => from + i * step).filter(
    (cp) => cp < 0xd800 || cp > 0xdfff,
  );
const SWEEP = [...codePoints(1, 0x1ffff, 1), ...codePoints(0x20000, 0x10ffff, 61)];

t.test('TypeScript and SQL agree on every code point of planes 0 and 1, and a sample of the rest', async (t) => {
  for (const template of TEMPLATES) {
    // The server answers only what it accepts; everything else must be refused here too.
    const accepted = await db.any(sql.type(z.object({ cp: z.number(), canonical: z.string() }))`
      select cp, c as canonical from unnest(${sql.array(SWEEP, 'int4')}::int[]) cp, canonical_email(${template.sql}) c
      where c is not null`);
    const server = new Map(accepted.map((row) => [row.cp, row.canonical]));
    const disagreements: string[] = [];
    let ours = 0;
    for (const cp of SWEEP) {
      const local = canonicalEmail(template.js(String.fromCodePoint(cp)));
      if (local !== null) ours++;
      if (local !== (server.get(cp) ?? null))
        disagreements.push(`U+${cp.toString(16).toUpperCase()}: ts ${local}, sql ${server.get(cp) ?? null}`);
    }
    t.same(disagreements.slice(0, 20), [], `${template.name}: ${ours} code points accepted by both`);
    t.ok(ours >= 90, `${template.name}: the sweep saw accepted addresses`);
  }
});
