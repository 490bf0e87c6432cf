// Insight boards on the Agent API: list and read the boards of the caller's
// workspace, publish (public needs a person's approval of the exact request),
// unpublish, rotate the hosted link. Extensions: create a board, save content.
// Every query is scoped by request.agent.tenantId, so a board of another
// workspace is a 404 exactly like a missing one.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { BoardNotFoundError, boardContent, createBoard, findBoard, listBoards, saveBoardVersion, type BoardRow } from '../../../core/boards/boards.ts';
import { BoardVersionMissingError, NotPublishedPubliclyError, publishBoard, readPublication, rotateBoardLink, unpublishBoard, type NewLink, type PublicationRow } from '../../../core/boards/publications.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import {
  Board, BoardList, BoardParams, CreateBody, ListQuery, PublicationResponse, PublishBody, PublishResponse,
  RotateBody, RotateResponse, SaveBody, UnpublishBody, UnpublishResponse,
} from './board-schemas.ts';

export const toBoardSummary = (b: BoardRow) => ({
  id: b.id, title: b.title, scope_type: b.scope_type, scope_id: b.scope_id, position: b.position,
  latest_version: b.latest_version, created_at: b.created_at, updated_at: b.updated_at,
});
export const toPublication = (p: PublicationRow) => ({
  board_id: p.board_id, state: p.state, version: p.version, visibility: p.visibility, published_at: p.published_at,
  unpublished_at: p.unpublished_at, active_link: p.link_created_at ? { created_at: p.link_created_at } : null,
});
export const hostedUrl = (baseUrl: string, secret: string) => `${baseUrl}/boards/public/${encodeURIComponent(secret)}`;
export const toLink = (baseUrl: string, l: NewLink) => ({ url: hostedUrl(baseUrl, l.secret), secret: l.secret, created_at: l.createdAt });

const notFound = () => new AgentHttpError(404, 'not_found', 'No such board in this workspace.', 'reread_list');
/** Maps core refusals to Agent API errors. */
function refusal(error: unknown): never {
  if (error instanceof BoardNotFoundError) throw notFound();
  if (error instanceof BoardVersionMissingError) throw new AgentHttpError(404, 'version_not_found', error.message, 'fix_request');
  if (error instanceof NotPublishedPubliclyError) throw new AgentHttpError(409, 'not_published_publicly', error.message, 'fix_request');
  throw error;
}

const readErrors = { 400: AgentApiError, 401: AgentApiError, 403: AgentApiError, 404: AgentApiError, 429: SharedRateLimitError, 503: AgentApiError };
const writeErrors = { ...readErrors, 409: AgentApiError };
const IDEMPOTENCY = 'Requires `Idempotency-Key` (8-200 characters, unique to this exact mutation); an identical retry within 24 hours returns the recorded outcome with `Idempotency-Replayed: true`.';

const agentBoardRoutes: FastifyPluginAsyncZod = async (app) => {
  const read = { onRequest: app.requireAgent('svc:boards:read') };
  const write = { onRequest: app.requireAgent('svc:boards:publish'), ...app.agentIdempotency() };
  const readSecurity = [{ AgentBearer: ['svc:boards:read'] }];
  const writeSecurity = [{ AgentBearer: ['svc:boards:publish'] }];
  const baseUrl = app.config.baseUrl;

  app.get('/api/agent/v1/boards', {
    ...read,
    schema: { operationId: 'listInsightBoards', tags: ['agent'], summary: 'Boards of the workspace, in position order', security: readSecurity,
      querystring: ListQuery, response: { 200: BoardList, ...readErrors } },
  }, async (request) => {
    const page = await listBoards(app.db, request.agent!.tenantId, request.query);
    return { items: page.items.map(toBoardSummary), next_cursor: page.nextCursor };
  });

  app.get('/api/agent/v1/boards/:boardId', {
    ...read,
    schema: { operationId: 'getInsightBoard', tags: ['agent'], summary: 'A board with its latest saved content', security: readSecurity,
      params: BoardParams, response: { 200: Board, ...readErrors } },
  }, async (request) => {
    const board = await findBoard(app.db, request.agent!.tenantId, request.params.boardId);
    if (!board) throw notFound();
    return { ...toBoardSummary(board), content: ((await boardContent(app.db, board.id, board.latest_version)) ?? null) as Record<string, unknown> | unknown[] | null };
  });

  app.get('/api/agent/v1/boards/:boardId/publication', {
    ...read,
    schema: { operationId: 'getInsightBoardPublication', tags: ['agent'], summary: 'Hosted publication state (never a link secret)', security: readSecurity,
      params: BoardParams, response: { 200: PublicationResponse, ...readErrors } },
  }, async (request) => {
    try {
      return toPublication(await readPublication(app.db, request.agent!.tenantId, request.params.boardId));
    } catch (error) {
      refusal(error);
    }
  });

  app.post('/api/agent/v1/boards/:boardId/publish', {
    ...write,
    schema: { operationId: 'publishInsightBoard', tags: ['agent'], summary: 'Publish a saved version (public needs an approval of this exact request)',
      description: `Private publishes at once. Public answers \`approval_required\` with an \`approve_url\` to hand to a tenant Admin; once approved, send the identical request again (same body, a new Idempotency-Key) to publish. A different request needs its own approval. The first public publication returns the hosted link secret once. ${IDEMPOTENCY}`,
      security: writeSecurity, params: BoardParams, body: PublishBody, response: { 200: PublishResponse, ...writeErrors } },
  }, async (request) => {
    const agent = request.agent!;
    let outcome;
    try {
      outcome = await publishBoard(app.db, { tenantId: agent.tenantId, boardId: request.params.boardId, principalId: agent.principalId, body: request.body });
    } catch (error) {
      refusal(error);
    }
    if (outcome.kind === 'approval_denied') {
      throw new AgentHttpError(403, 'approval_denied', 'A tenant Admin denied this exact publish request; send a different request (for example visibility private).', 'fix_request');
    }
    if (outcome.kind === 'approval_required') {
      return {
        state: 'approval_required' as const,
        approval: { id: outcome.approvalId, state: 'pending' as const, approve_url: `${baseUrl}/api/boards/approvals/${outcome.approvalId}` },
        next_action: 'await_approval' as const,
      };
    }
    return { state: 'published' as const, publication: toPublication(outcome.publication), link: outcome.link ? toLink(baseUrl, outcome.link) : null };
  });

  app.post('/api/agent/v1/boards/:boardId/unpublish', {
    ...write,
    schema: { operationId: 'unpublishInsightBoard', tags: ['agent'], summary: 'Unpublish the hosted board and revoke its active links', description: IDEMPOTENCY,
      security: writeSecurity, params: BoardParams, body: UnpublishBody, response: { 200: UnpublishResponse, ...writeErrors } },
  }, async (request) => {
    try {
      const { publication, revokedLinks } = await unpublishBoard(app.db, request.agent!.tenantId, request.params.boardId);
      return { publication: toPublication(publication), revoked_links: revokedLinks };
    } catch (error) {
      refusal(error);
    }
  });

  app.post('/api/agent/v1/boards/:boardId/rotate-link', {
    ...write,
    schema: { operationId: 'rotateInsightBoardLink', tags: ['agent'], summary: 'Revoke the hosted link and issue a new secret, returned exactly once',
      description: `Needs a public publication (409 not_published_publicly otherwise). ${IDEMPOTENCY}`,
      security: writeSecurity, params: BoardParams, body: RotateBody, response: { 200: RotateResponse, ...writeErrors } },
  }, async (request) => {
    try {
      const { link, revokedLinks } = await rotateBoardLink(app.db, request.agent!.tenantId, request.params.boardId);
      return { board_id: request.params.boardId, link: toLink(baseUrl, link), revoked_links: revokedLinks };
    } catch (error) {
      refusal(error);
    }
  });

  // Extensions (not in the published table): agents create and save boards.
  app.post('/api/agent/v1/boards', {
    ...write,
    schema: { operationId: 'createInsightBoard', tags: ['agent'], summary: 'Extension: create a board (with optional first content version)', description: IDEMPOTENCY,
      security: writeSecurity, body: CreateBody, response: { 201: Board, ...writeErrors } },
  }, async (request, reply) => {
    const agent = request.agent!;
    const { title, scope_type, scope_id, content } = request.body;
    const board = await createBoard(app.db, agent.tenantId, { principalId: agent.principalId }, { title, scopeType: scope_type, scopeId: scope_id, content });
    return reply.code(201).send({ ...toBoardSummary(board), content: content ?? null });
  });

  app.put('/api/agent/v1/boards/:boardId/content', {
    ...write,
    schema: { operationId: 'saveInsightBoardVersion', tags: ['agent'], summary: 'Extension: save content as the next version', description: IDEMPOTENCY,
      security: writeSecurity, params: BoardParams, body: SaveBody, response: { 200: Board, ...writeErrors } },
  }, async (request) => {
    try {
      const board = await saveBoardVersion(app.db, request.agent!.tenantId, request.params.boardId, request.body.content);
      return { ...toBoardSummary(board), content: request.body.content };
    } catch (error) {
      refusal(error);
    }
  });

  // The router refuses a path segment longer than its maxParamLength (100)
  // before any schema runs; these catch-alls answer such board ids: over 256
  // characters is the spec's 400, an in-bounds one names no board (ids are UUIDs).
  const tooLong = async (request: { params: unknown }) => {
    const boardId = ((request.params as Record<string, string>)['*'] ?? '').split('/')[0] ?? '';
    if (boardId.length > 256) throw new AgentHttpError(400, 'invalid_request', 'Invalid request: path.boardId: at most 256 characters.', 'fix_request');
    throw notFound();
  };
  app.get('/api/agent/v1/boards/*', { ...read, schema: { hide: true } }, tooLong);
  app.post('/api/agent/v1/boards/*', { onRequest: app.requireAgent('svc:boards:publish'), schema: { hide: true } }, tooLong);
  app.put('/api/agent/v1/boards/*', { onRequest: app.requireAgent('svc:boards:publish'), schema: { hide: true } }, tooLong);
};

export default agentBoardRoutes;
