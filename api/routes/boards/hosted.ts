// GET /boards/public/:secret: the hosted board behind a public link. The
// secret IS the link, so this route logs only warnings (no request line with
// the URL), answers no-store and sends no referrer. A revoked or rotated-out
// secret is a 404 at once (lookups go by hash against live rows).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { hostedBoard } from '../../../core/boards/publications.ts';
import { PlatformHttpError } from '../../errors.ts';
import { html, sendPage } from '../../pages/layout.ts';

const hostedBoardRoutes: FastifyPluginAsyncZod = async (app) => {
  app.get('/boards/public/:secret', {
    logLevel: 'warn',
    schema: { hide: true, params: z.object({ secret: z.string().min(1).max(200) }) },
  }, async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').header('x-robots-tag', 'noindex');
    const board = await hostedBoard(app.db, request.params.secret);
    if (!board) throw new PlatformHttpError(404, 'not_found', 'No such board.');
    if ((request.headers.accept ?? '').includes('application/json')) {
      return reply.type('application/json; charset=utf-8').send({ title: board.title, version: board.version, content: board.content });
    }
    return sendPage(reply, {
      title: board.title,
      body: html`<p class="muted">Version ${board.version}</p><pre>${JSON.stringify(board.content, null, 2)}</pre>`,
    });
  });
};

export default hostedBoardRoutes;
