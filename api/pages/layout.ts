// The one shell of every page for people (landing page, HTML 404, claim
// page, billing sandbox, hosted board): doctype, viewport, one small style
// sheet sent inline under a per-response CSP nonce, a header linking home
// and a footer linking the API reference. No script runs on these pages
// but two small files of our own, named with the nonce: the operator
// console's and the invitation page's; the CSP says so, and forbids framing
// and foreign form targets.
import { randomBytes } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { html, Html } from './html.ts';

export { html, Html, escapeHtml } from './html.ts';

const STYLE = `*{box-sizing:border-box}body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:0 auto;padding:0 1rem;color:#1b1b1b;background:#fff}
header,footer{padding:.8rem 0;color:#555;font-size:.9rem}header{border-bottom:1px solid #ddd}footer{border-top:1px solid #ddd;margin-top:2rem}
header a{font-weight:600;color:inherit;text-decoration:none}a{color:#0b57b0}main{padding:1rem 0}
h1{font-size:1.4rem;line-height:1.3}h2{font-size:1.1rem;margin-top:1.6rem}dt{font-weight:600}dd{margin:0 0 .6rem}
code,pre,.url{font-family:ui-monospace,monospace;font-size:.9em;overflow-wrap:anywhere}pre{white-space:pre-wrap;background:#f5f5f5;padding:.6rem;overflow-x:auto}
ul.links{padding-left:1.1rem}ul.links li{margin:.4rem 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd}
th,td,td code,.state,label,button{overflow-wrap:break-word}th,td time{white-space:nowrap}
@media (max-width:48rem){table{display:block;overflow-x:auto;background:linear-gradient(90deg,#fff 30%,#fff0) 0 0/2rem 100% no-repeat local,linear-gradient(270deg,#fff 30%,#fff0) 100% 0/2rem 100% no-repeat local,radial-gradient(farthest-side at 0 50%,#0003,#0000) 0 0/.7rem 100% no-repeat scroll,radial-gradient(farthest-side at 100% 50%,#0003,#0000) 100% 0/.7rem 100% no-repeat scroll}
caption{display:block;text-align:left}td{min-width:7rem}}form{display:inline}
label{display:block;margin:.5rem 0}input[type=email],input[type=password]{width:100%;padding:.4rem;font:inherit}
button{font:inherit;padding:.4rem 1rem;margin:.6rem .4rem 0 0}
.code{font:700 2rem/1.2 ui-monospace,monospace;letter-spacing:.2rem;padding:1rem;border:2px dashed #555;text-align:center}
.error{color:#a40000;border-left:4px solid #a40000;padding-left:.6rem}
.notice{background:#fff4ce;border:1px solid #d9b600;padding:.5rem .8rem;font-weight:600}.muted{color:#555}
.ok{color:#0a6b2d;font-weight:600}.bad{color:#a40000;font-weight:600}
main{overflow-wrap:anywhere}h3{font-size:1.05rem}h4{font-size:1rem}section{margin:1rem 0}
.cards{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(13rem,1fr));gap:.6rem}
.card{border:1px solid #ddd;border-radius:.4rem;padding:.6rem}.card-label{display:block;color:#555;font-size:.85rem}
.card-value{display:block;font-size:1.4rem;font-weight:700}.num{overflow-wrap:normal;word-break:normal}.card-value small{font-size:.8rem;font-weight:400}
.preview{border:1px solid #ddd;padding:0 .8rem;margin:1rem 0}
body.wide{max-width:80rem}nav.console{display:flex;flex-wrap:wrap;gap:.2rem .9rem}nav.console a{white-space:nowrap}nav.console a[aria-current]{font-weight:700;color:inherit;text-decoration:none}
.small{font-size:.85rem}.stale{color:#a40000}
.state{display:inline-block;font-size:.8rem;font-weight:600;line-height:1.4;padding:0 .45rem;border-radius:.7rem;border:1px solid #bbb;background:#f1f1f1;color:#333}
.state-failed{background:#fdecea;border-color:#e0a9a3;color:#a40000}.state-succeeded{background:#e8f5e9;border-color:#a5d6a7;color:#0a6b2d}
.state-running,.state-cancelling{background:#e3f0fd;border-color:#9fc3ee;color:#0b57b0}.state-queued,.state-waiting{background:#fff8e1;border-color:#e6cf7a;color:#6d5200}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(22rem,100%),1fr));gap:1rem}.chart-box{margin:0;min-width:0}
.chart-title{font-weight:600;font-size:.95rem}.chart-plot{display:grid;grid-template-columns:3.2rem minmax(0,1fr);column-gap:.35rem;padding:.5rem 0 0}
.chart{display:block;width:100%;height:auto}.axis{font-size:.75rem;line-height:1.2;color:#555;white-space:nowrap}
.axis-y{position:relative}.axis-y span{position:absolute;right:0;transform:translateY(-50%)}.axis-y .at-top{top:0}.axis-y .at-mid{top:50%}.axis-y .at-bottom{top:100%}
.axis-x{grid-column:2;display:flex;justify-content:space-between;padding-top:.2rem}.legend{margin:.3rem 0 0}.legend span{margin-right:.8rem;white-space:nowrap}.chart-note{margin:.2rem 0 0}
.filters label{display:inline-block;margin:.3rem .6rem .3rem 0}.filters input,.filters select{font:inherit;padding:.2rem}
input[type=text].reason{width:100%;max-width:30rem;padding:.3rem;font:inherit}.live-status{float:right;font-size:.8rem;color:#555}`;

export type PageOptions = {
  status?: number;
  /** The <title>; also the <h1> unless heading is given. */
  title: string;
  /** The <h1> when it should differ from the title (null: no <h1>, the body brings its own). */
  heading?: string | null;
  body: Html;
  /** A line above the heading (e.g. the billing sandbox's notice). */
  notice?: Html;
  /** Origins a form on the page may post to besides our own (form-action). */
  formTargets?: string[];
  /** Extra response headers (e.g. x-robots-tag). */
  headers?: Record<string, string>;
  /** A script of our own the page runs (the console's), loaded under the nonce; it may connect back to us only. */
  script?: string;
  /** Full-width body, for tables (the console). */
  wide?: boolean;
};

const originOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
};

/** The CSP every page sends: nothing but our nonce-tagged style, forms to ourselves (and the given origins). */
export function pageCsp(nonce: string, formTargets: string[] = [], script = false): string {
  const origins = [...new Set(formTargets.map(originOf).filter((o): o is string => !!o && o !== 'null'))];
  const formAction = ["'self'", ...origins].join(' ');
  const scripts = script ? `; script-src 'nonce-${nonce}'; connect-src 'self'` : '';
  return `default-src 'none'; style-src 'nonce-${nonce}'${scripts}; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`;
}

/** The full document for a page; the nonce must be the one the CSP names. */
export function renderPage(options: PageOptions, nonce: string): Html {
  const heading = options.heading === undefined ? options.title : options.heading;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${options.title}</title><style nonce="${nonce}">${new Html(STYLE)}</style>
${options.script ? html`<script nonce="${nonce}" src="${options.script}" defer></script>` : ''}</head>
<body${options.wide ? html` class="wide"` : ''}><header><a href="/">Agent platform</a></header>
<main>${options.notice ?? ''}${heading === null ? '' : html`<h1>${heading}</h1>`}${options.body}</main>
<footer><a href="/">Home</a> · <a href="/docs">API reference</a></footer></body></html>`;
}

/** Sends a page in the shared layout with the headers every page for people carries. */
export function sendPage(reply: FastifyReply, options: PageOptions): FastifyReply {
  const nonce = randomBytes(16).toString('base64');
  return reply
    .code(options.status ?? 200)
    .headers({
      ...options.headers,
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': pageCsp(nonce, options.formTargets, options.script !== undefined),
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    })
    .send(renderPage(options, nonce).value);
}
