// One canonical form of an e-mail address, for every lookup, login budget,
// invitation and new account. Its twin is the SQL function canonical_email()
// (sql/migrations/0049_canonical_email.sql); test/core/accounts/email.test.ts
// checks that the two agree, code point by code point.
//
// The rule is a fixed table, not a locale's or a Unicode version's: the
// fullwidth forms of ASCII (U+FF01-U+FF5E, what an IME types) and the Kelvin
// sign (U+212A, canonically K) become ASCII, white space at the edges is
// trimmed, then only printable ASCII is accepted and only A-Z is lowercased.
// Anything else (İ, ß, a trailing dot, control characters) is refused rather
// than guessed at: JavaScript and PostgreSQL lowercase such letters
// differently, and Node's and PostgreSQL's Unicode tables are of different
// versions, so one address spelt two ways would get two login budgets.

import { z } from 'zod';

const FULLWIDTH_OR_KELVIN = /[\uFF01-\uFF5E\u212A]/g;
const toAscii = (c: string) => (c === '\u212A' ? 'K' : String.fromCharCode(c.charCodeAt(0) - 0xfee0));
/** ASCII white space, no-break space and the ideographic space, at either end. */
const EDGE_SPACE = /^[\t\n\v\f\r \u00A0\u3000]+|[\t\n\v\f\r \u00A0\u3000]+$/g;
const PRINTABLE_ASCII = /^[\x21-\x7e]+$/;
const DOMAIN = /^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/;
/** Longer input is refused unread (an address is at most 320 characters). */
const RAW_MAX = 1_000;

/** An address in canonical form: only canonicalEmail makes one. */
export type CanonicalEmail = string & { readonly __canonical: unique symbol };

/**
 * The canonical form of an address, or null when it is refused: one `@`, a
 * local part of at most 64 characters, a domain of letters, digits and
 * hyphens in dot-separated labels (no trailing dot), 320 characters in all.
 */
export function canonicalEmail(raw: string): CanonicalEmail | null {
  if (raw.length > RAW_MAX) return null;
  const text = raw.replace(FULLWIDTH_OR_KELVIN, toAscii).replace(EDGE_SPACE, '');
  if (text.length > 320 || !PRINTABLE_ASCII.test(text)) return null;
  const at = text.indexOf('@');
  if (at < 1 || at > 64 || at !== text.lastIndexOf('@')) return null;
  const domain = text.slice(at + 1);
  if (domain.length > 253 || !DOMAIN.test(domain)) return null;
  return text.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32)) as CanonicalEmail;
}

/** Whether two addresses are the same one (a refused address is nobody's). */
export function sameEmail(a: string | null | undefined, b: string | null | undefined): boolean {
  const left = a ? canonicalEmail(a) : null;
  return left !== null && left === (b ? canonicalEmail(b) : null);
}

/** An address an account can have, for every schema that takes one (z.email() alone allows what canonicalEmail refuses). */
export const AccountEmail = z
  .email({ abort: true })
  .max(320)
  .refine(
    (email) => canonicalEmail(email) !== null,
    'An address of printable ASCII (fullwidth letters count as ASCII): a local part (before @) of at most 64 characters and a domain of letters, digits and hyphens of at most 253, with no trailing dot.',
  );
