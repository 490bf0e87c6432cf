// GET /arazzo.yaml, /docs/llms.txt and the knowledge manifest. Each is sent
// from the cached bytes its hash was computed from, with that hash as ETag,
// so an agent polling for changes gets a cheap 304.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { knowledgeManifest, ownDocuments, type ContractDocument } from './documents.ts';
import { MANIFEST_PATH } from './llms.ts';

/** True when If-None-Match names this ETag (weak comparison, RFC 9110 13.1.2). */
function notModified(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

function send(request: FastifyRequest, reply: FastifyReply, doc: ContractDocument) {
  const etag = `"${doc.sha256}"`;
  reply.header('etag', etag).header('cache-control', 'public, max-age=300');
  if (notModified(request.headers['if-none-match'], etag)) return reply.code(304).send();
  return reply.type(doc.mediaType).send(doc.body);
}

const contractRoutes: FastifyPluginAsync = async (app) => {
  const { arazzo, llms } = ownDocuments(app.config);
  const hide = { schema: { hide: true } };
  app.get(arazzo.path, hide, async (request, reply) => send(request, reply, arazzo));
  app.get(llms.path, hide, async (request, reply) => send(request, reply, llms));
  app.get(MANIFEST_PATH, hide, async (request, reply) => send(request, reply, await knowledgeManifest(app)));
};

export default contractRoutes;
