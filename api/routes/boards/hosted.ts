// GET /boards/public/:secret: the hosted board behind a public link, as a
// readable report (api/pages/report.ts), or JSON for a client that asks
// with Accept: application/json. The secret IS the link, so this route logs
// only warnings (no request line with the URL), answers no-store, sends no
// referrer and asks not to be indexed. A revoked, rotated-out or unknown
// secret is a 404 at once (lookups go by hash against live rows): a page
// saying so for people, the platform error shape for JSON clients.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { hostedBoard } from '../../../core/boards/publications.ts';
import { PlatformHttpError } from '../../errors.ts';
import { html, sendPage } from '../../pages/layout.ts';
import { renderReport } from '../../pages/report.ts';

const HEADERS = { 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'x-robots-tag': 'noindex' };

/** JSON only when asked for and not outranked by text/html (a browser's Accept lists both). */
function wantsJson(request: FastifyRequest): boolean {
  const ranges = (request.headers.accept ?? '').split(',').map((r) => r.split(';')[0]!.trim().toLowerCase());
  const json = ranges.indexOf('application/json');
  const page = ranges.indexOf('text/html');
  return json >= 0 && (page < 0 || json < page);
}

const gone = (reply: FastifyReply) =>
  sendPage(reply, {
    status: 404,
    title: 'This board link does not work',
    body: html`<p>There is no board behind this link. It may have been unpublished, replaced by a new link, or never existed.</p>
<p>Ask whoever shared it for the current link.</p>`,
    headers: HEADERS,
  });

const hostedBoardRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get(
    '/boards/public/:secret',
    {
      logLevel: 'warn',
      schema: { hide: true, params: z.object({ secret: z.string().min(1).max(200) }) },
    },
    async (request, reply) => {
      reply.headers(HEADERS);
      const json = wantsJson(request);
      const board = await hostedBoard(app.db, request.params.secret);
      if (!board) {
        if (json) throw new PlatformHttpError(404, 'not_found', 'No such board.');
        return gone(reply);
      }
      if (json)
        return reply
          .type('application/json; charset=utf-8')
          .send({ title: board.title, version: board.version, content: board.content });
      return sendPage(reply, {
        title: board.title,
        body: html`<p class="muted">Version ${board.version}</p>${renderReport(board.content)}`,
        headers: HEADERS,
      });
    },
  );
};

export default hostedBoardRoutes;
