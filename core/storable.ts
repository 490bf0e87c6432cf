// Text from outside (model answers, channel messages, webhook payloads,
// names from other services) made storable where it enters. PostgreSQL's
// text and jsonb refuse a NUL character and an unpaired UTF-16 surrogate, and
// the same refusal comes again at every retry; so NUL is dropped and a lone
// surrogate becomes U+FFFD, as a UTF-8 decoder does with a broken byte.
// (The API refuses such input at its edge instead: api/plugins/input-guard.ts.)

// A high surrogate not followed by a low one, or a low one after no high one
// (without the u flag a regex reads code units, so the halves are visible).
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** `s` without NUL characters, its lone surrogates replaced by U+FFFD; `s` itself when it is clean. */
export function storableText(s: string): string {
  const nul = s.includes('\u0000');
  if (!nul && !LONE_SURROGATE.test(s)) return s;
  return (nul ? s.replaceAll('\u0000', '') : s).replace(LONE_SURROGATES, '\uFFFD');
}

/** storableText of a value that may be absent. */
export const storableTextOrNull = (s: string | null | undefined): string | null =>
  typeof s === 'string' ? storableText(s) : null;

// In JSON.stringify's text every NUL is the escape \u0000 and every lone
// surrogate an escape \udXXX (a whole pair is written as itself), and a
// backslash of the text is \\: read left to right, these three cover them.
const JSON_POISON = /\\\\|\\u0000|\\ud[89a-f][0-9a-f]{2}/gi;

/**
 * A JSON value (for a jsonb column) with storableText applied to every string
 * and property name, at any depth; the value itself when it is clean. A
 * value that needed mending comes back as a copy made through JSON, so
 * `undefined` members drop out and dates become strings, as they would in
 * the column anyway.
 */
export function storableJson<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (value === null || typeof value !== 'object') return value;
  const json = JSON.stringify(value);
  let mended = false;
  const fixed = json.replace(JSON_POISON, (m) => {
    if (m === '\\\\') return m;
    mended = true;
    return m === '\\u0000' ? '' : '\\ufffd';
  });
  return mended ? (JSON.parse(fixed) as T) : value;
}

/**
 * Mends a stream of text pieces as they come: a piece that ends in a high
 * surrogate keeps it back until the next piece (whose low surrogate may
 * complete the pair); `last` lets it go.
 */
export function storableStream() {
  let held = '';
  return (piece: string, last = false): string => {
    const s = held + piece;
    const code = s.charCodeAt(s.length - 1);
    const keep = !last && code >= 0xd800 && code <= 0xdbff;
    held = keep ? s.slice(-1) : '';
    return storableText(keep ? s.slice(0, -1) : s);
  };
}
