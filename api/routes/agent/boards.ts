// Insight boards on the Agent API: list and read the boards of the caller's
// workspace, publish (public needs a person's approval of the exact request),
// unpublish, rotate the hosted link. Extensions: create a board, save content.
// Every query is scoped by request.agent.tenantId, so a board of another
// workspace is a 404 exactly like a missing one.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  BoardNotFoundError,
  BoardScopeNotFoundError,
  boardContent,
  createBoard,
  findBoard,
  listBoards,
  saveBoardVersion,
  type BoardRow,
} from '../../../core/boards/boards.ts';
import {
  BoardVersionMissingError,
  NotPublishedPubliclyError,
  publishBoard,
  readPublication,
  rotateBoardLink,
  unpublishBoard,
  type NewLink,
  type PublicationRow,
} from '../../../core/boards/publications.ts';
import { AgentApiError, AgentHttpError, SharedRateLimitError } from '../../errors.ts';
import { approvalPageUrl } from '../boards/approval-page.ts';
import { defineOperation, registerHttpOperation } from './operation.ts';
import {
  Board,
  BoardList,
  BoardParams,
  CreateBody,
  ListQuery,
  PublicationResponse,
  PublishBody,
  PublishResponse,
  RotateBody,
  RotateResponse,
  SaveBody,
  UnpublishBody,
  UnpublishResponse,
} from './board-schemas.ts';

export const toBoardSummary = (b: BoardRow) => ({
  id: b.id,
  title: b.title,
  scope_type: b.scope_type,
  scope_id: b.scope_id,
  position: b.position,
  latest_version: b.latest_version,
  created_at: b.created_at,
  updated_at: b.updated_at,
});
export const toPublication = (p: PublicationRow) => ({
  board_id: p.board_id,
  state: p.state,
  version: p.version,
  visibility: p.visibility,
  published_at: p.published_at,
  unpublished_at: p.unpublished_at,
  active_link: p.link_created_at ? { created_at: p.link_created_at } : null,
});
export const hostedUrl = (baseUrl: string, secret: string) => `${baseUrl}/boards/public/${encodeURIComponent(secret)}`;
export const toLink = (baseUrl: string, l: NewLink) => ({
  url: hostedUrl(baseUrl, l.secret),
  secret: l.secret,
  created_at: l.createdAt,
});

const notFound = () => new AgentHttpError(404, 'not_found', 'No such board in this workspace.', 'reread_list');
/** Maps core refusals to Agent API errors. */
function refusal(error: unknown): never {
  if (error instanceof BoardNotFoundError) throw notFound();
  if (error instanceof BoardScopeNotFoundError)
    throw new AgentHttpError(404, 'not_found', error.message, 'reread_list');
  if (error instanceof BoardVersionMissingError)
    throw new AgentHttpError(404, 'version_not_found', error.message, 'fix_request');
  if (error instanceof NotPublishedPubliclyError)
    throw new AgentHttpError(409, 'not_published_publicly', error.message, 'fix_request');
  throw error;
}

const readErrors = {
  400: AgentApiError,
  401: AgentApiError,
  403: AgentApiError,
  404: AgentApiError,
  429: SharedRateLimitError,
  503: AgentApiError,
};
const writeErrors = { ...readErrors, 409: AgentApiError };
const IDEMPOTENCY =
  'Requires `Idempotency-Key` (8-200 characters, unique to this exact mutation); an identical retry within 24 hours returns the recorded outcome with `Idempotency-Replayed: true`.';

// A Viewer reads boards; making and publishing them is a Member's work (as POST /api/boards).
const read = { method: 'GET', scope: 'svc:boards:read', role: 'viewer', errors: readErrors } as const;
const write = { scope: 'svc:boards:publish', role: 'member', errors: writeErrors } as const;

export const boardOperations = [
  defineOperation({
    ...read,
    operationId: 'listInsightBoards',
    path: '/api/agent/v1/boards',
    summary: 'Boards of the workspace, in position order',
    query: ListQuery,
    response: BoardList,
    mcp: { title: 'List boards', readOnly: true },
    run: async (app, caller, { query }) => {
      const page = await listBoards(app.db, caller.agent.tenantId, query);
      return { items: page.items.map(toBoardSummary), next_cursor: page.nextCursor };
    },
  }),
  defineOperation({
    ...read,
    operationId: 'getInsightBoard',
    path: '/api/agent/v1/boards/:boardId',
    summary: 'A board with its latest saved content',
    params: BoardParams,
    response: Board,
    mcp: { title: 'Get a board', readOnly: true },
    run: async (app, caller, { params }) => {
      const board = await findBoard(app.db, caller.agent.tenantId, params.boardId);
      if (!board) throw notFound();
      return {
        ...toBoardSummary(board),
        content: ((await boardContent(app.db, board.id, board.latest_version)) ?? null) as
          | Record<string, unknown>
          | unknown[]
          | null,
      };
    },
  }),
  defineOperation({
    ...read,
    operationId: 'getInsightBoardPublication',
    path: '/api/agent/v1/boards/:boardId/publication',
    summary: 'Hosted publication state (never a link secret)',
    params: BoardParams,
    response: PublicationResponse,
    mcp: { title: "Get a board's publication state", readOnly: true },
    run: async (app, caller, { params }) => {
      try {
        return toPublication(await readPublication(app.db, caller.agent.tenantId, params.boardId));
      } catch (error) {
        refusal(error);
      }
    },
  }),
  defineOperation({
    ...write,
    method: 'POST',
    operationId: 'publishInsightBoard',
    path: '/api/agent/v1/boards/:boardId/publish',
    summary: 'Publish a saved version (public needs an approval of this exact request)',
    description: `Private publishes at once. Public answers \`approval_required\` with an \`approve_url\` to hand to a tenant Admin (a page where the person signs in, sees the board and approves or denies); once approved, send the identical request again (same body, a new Idempotency-Key) to publish. A different request needs its own approval. The first public publication returns the hosted link secret once. ${IDEMPOTENCY}`,
    params: BoardParams,
    body: PublishBody,
    response: PublishResponse,
    mcp: { title: 'Publish a board', readOnly: false },
    run: async (app, caller, { params, body }, db) => {
      const { agent } = caller;
      let outcome;
      try {
        outcome = await publishBoard(db, {
          tenantId: agent.tenantId,
          boardId: params.boardId,
          principalId: agent.principalId,
          body,
        });
      } catch (error) {
        refusal(error);
      }
      if (outcome.kind === 'approval_denied') {
        throw new AgentHttpError(
          403,
          'approval_denied',
          'A tenant Admin denied this exact publish request; send a different request (for example visibility private).',
          'fix_request',
        );
      }
      const baseUrl = app.config.baseUrl;
      if (outcome.kind === 'approval_required') {
        return {
          state: 'approval_required' as const,
          approval: {
            id: outcome.approvalId,
            state: 'pending' as const,
            approve_url: approvalPageUrl(baseUrl, outcome.approvalId),
          },
          next_action: 'await_approval' as const,
        };
      }
      return {
        state: 'published' as const,
        publication: toPublication(outcome.publication),
        link: outcome.link ? toLink(baseUrl, outcome.link) : null,
      };
    },
  }),
  defineOperation({
    ...write,
    method: 'POST',
    operationId: 'unpublishInsightBoard',
    path: '/api/agent/v1/boards/:boardId/unpublish',
    summary: 'Unpublish the hosted board and revoke its active links',
    description: IDEMPOTENCY,
    params: BoardParams,
    body: UnpublishBody,
    response: UnpublishResponse,
    mcp: { title: 'Unpublish a board', readOnly: false, destructive: true },
    run: async (_app, caller, { params }, db) => {
      try {
        const { publication, revokedLinks } = await unpublishBoard(db, caller.agent.tenantId, params.boardId);
        return { publication: toPublication(publication), revoked_links: revokedLinks };
      } catch (error) {
        refusal(error);
      }
    },
  }),
  defineOperation({
    ...write,
    method: 'POST',
    operationId: 'rotateInsightBoardLink',
    path: '/api/agent/v1/boards/:boardId/rotate-link',
    summary: 'Revoke the hosted link and issue a new secret, returned exactly once',
    description: `Needs a public publication (409 not_published_publicly otherwise). ${IDEMPOTENCY}`,
    params: BoardParams,
    body: RotateBody,
    response: RotateResponse,
    mcp: { title: "Rotate a board's hosted link", readOnly: false, destructive: true },
    run: async (app, caller, { params }, db) => {
      try {
        const { link, revokedLinks } = await rotateBoardLink(db, caller.agent.tenantId, params.boardId);
        return { board_id: params.boardId, link: toLink(app.config.baseUrl, link), revoked_links: revokedLinks };
      } catch (error) {
        refusal(error);
      }
    },
  }),
  // Extensions (not in the published table): agents create and save boards.
  defineOperation({
    ...write,
    method: 'POST',
    operationId: 'createInsightBoard',
    path: '/api/agent/v1/boards',
    summary: 'Extension: create a board (with optional first content version)',
    description: `scope_id names a company of the workspace (scope_type company) or a company agent (scope_type agent), as the company reads list them; any other id is 404 not_found. ${IDEMPOTENCY}`,
    body: CreateBody,
    response: Board,
    status: 201,
    mcp: { title: 'Create a board', readOnly: false },
    run: async (_app, caller, { body }, db) => {
      const { title, scope_type, scope_id, content } = body;
      try {
        const board = await createBoard(
          db,
          caller.agent.tenantId,
          { principalId: caller.agent.principalId },
          { title, scopeType: scope_type, scopeId: scope_id, content },
        );
        return { ...toBoardSummary(board), content: content ?? null };
      } catch (error) {
        refusal(error);
      }
    },
  }),
  defineOperation({
    ...write,
    method: 'PUT',
    operationId: 'saveInsightBoardVersion',
    path: '/api/agent/v1/boards/:boardId/content',
    summary: 'Extension: save content as the next version',
    description: IDEMPOTENCY,
    params: BoardParams,
    body: SaveBody,
    response: Board,
    mcp: { title: 'Save board content', readOnly: false },
    run: async (_app, caller, { params, body }, db) => {
      try {
        const board = await saveBoardVersion(db, caller.agent.tenantId, params.boardId, body.content);
        return { ...toBoardSummary(board), content: body.content };
      } catch (error) {
        refusal(error);
      }
    },
  }),
];

const agentBoardRoutes: FastifyPluginAsyncZod = async (app) => {
  for (const op of boardOperations) registerHttpOperation(app, op);

  // The router refuses a path segment longer than its maxParamLength (100)
  // before any schema runs; these catch-alls answer such board ids: over 256
  // characters is the spec's 400, an in-bounds one names no board (ids are UUIDs).
  const tooLong = async (request: { params: unknown }) => {
    const boardId = ((request.params as Record<string, string>)['*'] ?? '').split('/')[0] ?? '';
    if (boardId.length > 256)
      throw new AgentHttpError(
        400,
        'invalid_request',
        'Invalid request: path.boardId: at most 256 characters.',
        'fix_request',
      );
    throw notFound();
  };
  app.get(
    '/api/agent/v1/boards/*',
    { onRequest: app.requireAgent('svc:boards:read'), schema: { hide: true } },
    tooLong,
  );
  app.post(
    '/api/agent/v1/boards/*',
    { onRequest: app.requireAgent('svc:boards:publish'), schema: { hide: true } },
    tooLong,
  );
  app.put(
    '/api/agent/v1/boards/*',
    { onRequest: app.requireAgent('svc:boards:publish'), schema: { hide: true } },
    tooLong,
  );
};

export default agentBoardRoutes;
