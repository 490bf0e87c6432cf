// Server-rendered HTML for the claim page: a tagged template that escapes
// every interpolated value unless it is already rendered HTML, and one layout
// with the headers such a page needs (no caching, no framing, no scripts).
import { randomBytes } from 'node:crypto';
import type { FastifyReply } from 'fastify';

export class Html {
  constructor(readonly value: string) {}
  toString() {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };
export const escapeHtml = (value: string) => value.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);

type Value = Html | string | number | null | undefined | false | Value[];

function render(value: Value): string {
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  if (value instanceof Html) return value.value;
  return escapeHtml(String(value));
}

/** html`<p>${text}</p>`: interpolations are escaped; nested html`` stays as it is. */
export function html(strings: TemplateStringsArray, ...values: Value[]): Html {
  return new Html(strings.reduce((out, s, i) => out + s + (i < values.length ? render(values[i]!) : ''), ''));
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.4rem}dt{font-weight:600}dd{margin:0 0 .6rem}label{display:block;margin:.5rem 0}
input[type=email],input[type=password]{width:100%;padding:.4rem;font:inherit}button{font:inherit;padding:.4rem 1rem;margin:.6rem .4rem 0 0}
.code{font:700 2rem/1.2 ui-monospace,monospace;letter-spacing:.2rem;padding:1rem;border:2px dashed #555;text-align:center}
.error{color:#a40000;border-left:4px solid #a40000;padding-left:.6rem}`;

export function sendPage(reply: FastifyReply, status: number, title: string, body: Html): FastifyReply {
  const nonce = randomBytes(16).toString('base64');
  const page = html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${title}</title><style nonce="${nonce}">${new Html(STYLE)}</style></head>
<body><main><h1>${title}</h1>${body}</main></body></html>`;
  return reply
    .code(status)
    .headers({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    })
    .send(page.value);
}
