// GET /boards/public/:secret: the hosted board behind a public link. The
// secret IS the link, so this route logs only warnings (no request line with
// the URL), answers no-store and sends no referrer. A revoked or rotated-out
// secret is a 404 at once (lookups go by hash against live rows).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { hostedBoard } from '../../../core/boards/publications.ts';
import { PlatformHttpError } from '../../errors.ts';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

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
    const body = escapeHtml(JSON.stringify(board.content, null, 2));
    return reply
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
      .type('text/html; charset=utf-8')
      .send(`<!doctype html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>${escapeHtml(board.title)}</title></head>`
        + `<body><h1>${escapeHtml(board.title)}</h1><p>Version ${board.version}</p><pre>${body}</pre></body></html>`);
  });
};

export default hostedBoardRoutes;
