// The small page a person sees at the end of connecting a partner account
// (in the window the app opened): done, or not connected and why. Browsers
// get it; a client that asks for JSON gets the platform error shape instead.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { html, sendPage } from '../../pages/layout.ts';

/** A page unless the client prefers JSON over HTML (a browser's Accept lists text/html first). */
export function wantsPage(request: FastifyRequest): boolean {
  const ranges = (request.headers.accept ?? '').split(',').map((r) => r.split(';')[0]!.trim().toLowerCase());
  const page = ranges.indexOf('text/html');
  const json = ranges.indexOf('application/json');
  return page >= 0 && (json < 0 || page < json);
}

export function resultPage(reply: FastifyReply, status: number, ok: boolean, message: string): FastifyReply {
  return sendPage(reply, {
    status,
    title: ok ? 'Account connected' : 'Account not connected',
    body: html`<p class="${ok ? 'ok' : 'bad'}">${message}</p>
<p class="muted">${ok ? 'Return to the app: it shows the connected account.' : 'Return to the app to try again.'}</p>`,
    headers: { 'x-robots-tag': 'noindex' },
  });
}
