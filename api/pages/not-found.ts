// The HTML 404 a browser gets for an unknown address. Only a navigation
// (GET/HEAD preferring text/html) outside the machine surfaces gets it;
// API clients, OAuth, MCP and discovery keep their JSON error shapes.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { html, sendPage } from './layout.ts';

const MACHINE_PREFIXES = ['/api/', '/oauth2/', '/.well-known/', '/agent/identity/'];
const MACHINE_PATHS = ['/api', '/oauth2', '/mcp', '/.well-known', '/agent/identity'];
const SHOWN_PATH_MAX = 200;

function pathOf(url: string): string {
  const raw = url.split('?')[0] ?? url;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** q of the first media range in an Accept header that matches exactly (0 when absent). */
function quality(accept: string, type: string): { q: number; index: number } {
  const ranges = accept.split(',');
  for (let i = 0; i < ranges.length; i++) {
    const [range, ...params] = ranges[i]!.split(';').map((p) => p.trim().toLowerCase());
    if (range !== type) continue;
    const q = params.find((p) => p.startsWith('q='));
    const value = q ? Number(q.slice(2)) : 1;
    return { q: Number.isFinite(value) ? value : 0, index: i };
  }
  return { q: 0, index: Infinity };
}

/** The Accept header ranks text/html above application/json (a browser). */
export function prefersHtml(accept: string | undefined): boolean {
  const htmlQ = quality(accept ?? '', 'text/html');
  if (htmlQ.q === 0) return false;
  const jsonQ = quality(accept ?? '', 'application/json');
  return htmlQ.q > jsonQ.q || (htmlQ.q === jsonQ.q && htmlQ.index < jsonQ.index);
}

/** A browser navigation to a path that belongs to no machine surface. */
export function wantsHtmlPage(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = pathOf(request.url);
  if (MACHINE_PATHS.includes(path) || MACHINE_PREFIXES.some((p) => path.startsWith(p)) || path.startsWith('/mcp/'))
    return false;
  return prefersHtml(request.headers.accept);
}

export function sendNotFoundPage(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = pathOf(request.url);
  const shown = path.length > SHOWN_PATH_MAX ? `${path.slice(0, SHOWN_PATH_MAX)}…` : path;
  return sendPage(reply, {
    status: 404,
    title: 'Page not found',
    body: html`<p>There is no page at <code>${shown}</code>.</p>
<p><a href="/">Go to the start page</a> or read the <a href="/docs">API reference</a>.</p>`,
  });
}
