// Insight boards on the platform API: people create boards and save content,
// and a tenant Admin decides the public-publish approvals agents ask for
// (JSON here; the approve_url an agent hands over is the page in
// ./approval-page.ts, GET /boards/approvals/:id).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { decideApproval, findApproval, type ApprovalRow } from '../../../core/boards/approvals.ts';
import {
  BoardNotFoundError,
  BoardScopeNotFoundError,
  createBoard,
  saveBoardVersion,
  type BoardRow,
} from '../../../core/boards/boards.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import approvalPageRoutes from './approval-page.ts';
import hostedBoardRoutes from './hosted.ts';

const Content = z
  .union([z.record(z.string(), z.unknown()), z.array(z.unknown())])
  .describe('Board content: a JSON object or array');
const PlatformBoard = z
  .object({
    id: z.uuid(),
    title: z.string(),
    scopeType: z.enum(['company', 'agent']),
    scopeId: z.string(),
    latestVersion: z.int(),
    createdAt: z.iso.datetime({ offset: true }),
    updatedAt: z.iso.datetime({ offset: true }),
  })
  .meta({ id: 'InsightBoard' });
const Approval = z
  .object({
    id: z.uuid(),
    boardId: z.uuid(),
    version: z.int(),
    visibility: z.enum(['private', 'public']),
    state: z.enum(['pending', 'approved', 'denied', 'consumed']),
    createdAt: z.iso.datetime({ offset: true }),
    decidedAt: z.iso.datetime({ offset: true }).nullable(),
  })
  .meta({ id: 'BoardPublishApproval' });

const toBoard = (b: BoardRow) => ({
  id: b.id,
  title: b.title,
  scopeType: b.scope_type,
  scopeId: b.scope_id,
  latestVersion: b.latest_version,
  createdAt: b.created_at,
  updatedAt: b.updated_at,
});
const toApproval = (a: ApprovalRow) => ({
  id: a.id,
  boardId: a.board_id,
  version: a.version,
  visibility: a.visibility,
  state: a.state,
  createdAt: a.created_at,
  decidedAt: a.decided_at,
});
const ApprovalParams = z.object({ approvalId: z.string().min(1).max(64) });

const boardRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const member = { onRequest: app.requireUser, preValidation: app.requireTenant('member') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  // The pages for people are registered with these routes so app.ts needs one line per surface.
  await app.register(hostedBoardRoutes);
  await app.register(approvalPageRoutes);

  app.post(
    '/api/boards',
    {
      ...member,
      schema: {
        operationId: 'createBoard',
        tags: ['boards'],
        summary: 'Create an insight board (with optional first content version)',
        description:
          'scopeId names a company of the tenant (scopeType company) or a company agent (scopeType agent); any other id is 404 not_found.',
        security,
        headers: TenantHeaders,
        body: z
          .object({
            title: z.string().trim().min(1).max(200),
            scopeType: z.enum(['company', 'agent']),
            scopeId: z.string().min(1).max(128),
            content: Content.optional(),
          })
          .strict(),
        response: { 201: PlatformBoard, ...errors },
      },
    },
    async (request, reply) => {
      const { title, scopeType, scopeId, content } = request.body;
      try {
        const board = await createBoard(
          app.db,
          request.tenant!.id,
          { userId: request.user!.userId },
          { title, scopeType, scopeId, content },
        );
        return reply.code(201).send(toBoard(board));
      } catch (error) {
        if (error instanceof BoardScopeNotFoundError) throw new PlatformHttpError(404, 'not_found', error.message);
        throw error;
      }
    },
  );

  app.put(
    '/api/boards/:boardId/content',
    {
      ...member,
      schema: {
        operationId: 'saveBoardContent',
        tags: ['boards'],
        summary: 'Save content as the next version',
        security,
        headers: TenantHeaders,
        params: z.object({ boardId: z.string().min(1).max(256) }),
        body: z.object({ content: Content }).strict(),
        response: { 200: PlatformBoard, ...errors },
      },
    },
    async (request) => {
      try {
        return toBoard(
          await saveBoardVersion(app.db, request.tenant!.id, request.params.boardId, request.body.content),
        );
      } catch (error) {
        if (error instanceof BoardNotFoundError) throw new PlatformHttpError(404, 'not_found', error.message);
        throw error;
      }
    },
  );

  app.get(
    '/api/boards/approvals/:approvalId',
    {
      ...viewer,
      schema: {
        operationId: 'getBoardPublishApproval',
        tags: ['boards'],
        summary: 'The publish request an agent asks a tenant Admin to approve',
        security,
        headers: TenantHeaders,
        params: ApprovalParams,
        response: { 200: Approval, ...errors },
      },
    },
    async (request) => {
      const approval = await findApproval(app.db, request.tenant!.id, request.params.approvalId);
      if (!approval) throw new PlatformHttpError(404, 'not_found', 'No such approval.');
      return toApproval(approval);
    },
  );

  for (const [action, decision] of [
    ['approve', 'approved'],
    ['deny', 'denied'],
  ] as const) {
    app.post(
      `/api/boards/approvals/:approvalId/${action}`,
      {
        ...admin,
        schema: {
          operationId: action === 'approve' ? 'approveBoardPublish' : 'denyBoardPublish',
          tags: ['boards'],
          summary:
            action === 'approve'
              ? "Approve this exact publish request; the agent's identical retry then publishes"
              : 'Deny this exact publish request',
          security,
          headers: TenantHeaders,
          params: ApprovalParams,
          response: { 200: Approval, ...errors, 409: PlatformError },
        },
      },
      async (request) => {
        const outcome = await decideApproval(
          app.db,
          request.tenant!.id,
          request.params.approvalId,
          request.user!.userId,
          decision,
        );
        if (outcome.kind === 'not_found') throw new PlatformHttpError(404, 'not_found', 'No such approval.');
        if (outcome.kind === 'already_decided')
          throw new PlatformHttpError(409, 'already_decided', `This approval is already ${outcome.approval.state}.`);
        return toApproval(outcome.approval);
      },
    );
  }
};

export default boardRoutes;
