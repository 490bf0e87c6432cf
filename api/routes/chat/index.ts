// Chat: provision, sessions, messages, the idempotent send (202 at once, the
// turn runs on a worker) and the turn's job status.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  CHAT_TURN_KIND,
  refusalStatus,
  personalKey,
  sendBatch,
  SessionNotFoundError,
} from '../../../core/chat/send.ts';
import {
  createChatSession,
  findSession,
  InvalidMessageCursorError,
  listMessages,
  listSessions,
  provisionChat,
  UnknownAgentError,
  type MessageRow,
  type SessionRow,
} from '../../../core/chat/sessions.ts';
import { findJobInTenant } from '../../../core/jobs/read.ts';
import { JobStatus, toJobStatus } from '../../../core/jobs/schema.ts';
import { InvalidCursorError } from '../../../core/paging.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { IDEMPOTENCY_KEY, Message, Provisioned, SendAccepted, SendBody, Session } from './schemas.ts';

const toSession = (s: SessionRow) => ({
  id: s.id,
  title: s.title,
  agentId: s.agent_id,
  model: s.model,
  createdAt: s.created_at,
  updatedAt: s.updated_at,
});
const toMessage = (m: MessageRow) => ({
  id: m.id,
  sessionId: m.session_id,
  role: m.role,
  content: m.content,
  attachments: m.attachments,
  companyScope: m.company_scope,
  model: m.model,
  jobId: m.job_id,
  createdAt: m.created_at,
});
const badCursor = () =>
  new PlatformHttpError(400, 'invalid_request', 'Invalid request: query.cursor: not a cursor from this list.');
const Page = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: z.string().min(1).max(200).optional(),
});

const chatRoutes: FastifyPluginAsyncZod = async (app) => {
  const security = [{ PlatformJWT: [] }];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const member = { onRequest: app.requireUser, preValidation: app.requireTenant('member') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.post(
    '/api/chat/init',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'initChat',
        tags: ['chat'],
        summary: 'Provision tenant, agent and session for the user; a second call returns what exists',
        security,
        response: { 200: Provisioned, 401: PlatformError },
      },
    },
    async (request) => provisionChat(app.db, request.user!.userId, app.config.providers.newTenantCreditsMicros),
  );

  app.get(
    '/api/chat/sessions',
    {
      ...viewer,
      schema: {
        operationId: 'listChatSessions',
        tags: ['chat'],
        summary: 'Sessions of the tenant, newest first',
        security,
        headers: TenantHeaders,
        querystring: Page,
        response: {
          200: z.object({ items: z.array(Session), nextCursor: z.string().nullable() }).meta({ id: 'ChatSessionPage' }),
          ...errors,
        },
      },
    },
    async (request) => {
      try {
        const page = await listSessions(app.db, request.tenant!.id, request.query.limit, request.query.cursor);
        return { items: page.items.map(toSession), nextCursor: page.nextCursor };
      } catch (error) {
        if (error instanceof InvalidCursorError) throw badCursor();
        throw error;
      }
    },
  );

  app.post(
    '/api/chat/sessions',
    {
      ...member,
      schema: {
        operationId: 'createChatSession',
        tags: ['chat'],
        summary: 'Create a session',
        security,
        headers: TenantHeaders,
        body: z.object({
          title: z.string().trim().min(1).max(200).optional(),
          agentId: z.uuid().optional(),
          model: z
            .string()
            .regex(/^[a-z0-9-]+\/[\w.:-]{1,100}$/)
            .optional(),
        }),
        response: { 201: Session, ...errors },
      },
    },
    async (request, reply) => {
      try {
        const session = await createChatSession(app.db, request.tenant!.id, request.user!.userId, request.body);
        return reply.code(201).send(toSession(session));
      } catch (error) {
        if (error instanceof UnknownAgentError) throw new PlatformHttpError(404, 'not_found', error.message);
        throw error;
      }
    },
  );

  app.get(
    '/api/chat/messages',
    {
      ...viewer,
      schema: {
        operationId: 'listChatMessages',
        tags: ['chat'],
        summary: 'Messages of a session, oldest to newest',
        security,
        headers: TenantHeaders,
        querystring: Page.extend({ sessionId: z.uuid() }),
        response: {
          200: z.object({ items: z.array(Message), nextCursor: z.string().nullable() }).meta({ id: 'ChatMessagePage' }),
          ...errors,
        },
      },
    },
    async (request) => {
      const { sessionId, limit, cursor } = request.query;
      if (!(await findSession(app.db, request.tenant!.id, sessionId)))
        throw new PlatformHttpError(404, 'not_found', 'No such session.');
      try {
        const page = await listMessages(app.db, request.tenant!.id, sessionId, limit, cursor);
        return { items: page.items.map(toMessage), nextCursor: page.nextCursor };
      } catch (error) {
        if (error instanceof InvalidMessageCursorError) throw badCursor();
        throw error;
      }
    },
  );

  app.post(
    '/api/chat/send',
    {
      ...member,
      schema: {
        operationId: 'sendChatMessage',
        tags: ['chat'],
        summary: 'Send a message; the turn runs asynchronously and its job id is returned at once',
        description:
          "Requires `Idempotency-Key` (8-200 printable ASCII, no spaces), scoped to the caller: another member's key never collides. Retrying with the same key and the same session, company scope, message and attachments returns the original 202 with `Idempotency-Replayed: true` and creates nothing; the same key with a different request is 409 IDEMPOTENCY_KEY_REUSED.",
        security,
        // Bounds are checked by the handler (400 or, when missing, 428), so they are documented, not validated.
        headers: TenantHeaders.extend({
          'idempotency-key': z.string().optional().meta({
            minLength: 8,
            maxLength: 200,
            pattern: '^[\\x21-\\x7E]+$',
            description: 'Unique per turn; reuse it only to retry the same turn. Missing: 428 IDEMPOTENCY_KEY_REQUIRED',
          }),
        }),
        body: SendBody,
        response: {
          202: SendAccepted,
          ...errors,
          402: PlatformError,
          409: PlatformError,
          428: PlatformError,
          429: PlatformError,
        },
      },
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key'];
      if (key === undefined)
        throw new PlatformHttpError(
          428,
          'IDEMPOTENCY_KEY_REQUIRED',
          'Send an Idempotency-Key header, and reuse it when retrying this turn.',
        );
      if (!IDEMPOTENCY_KEY.test(key))
        throw new PlatformHttpError(
          400,
          'INVALID_IDEMPOTENCY_KEY',
          'Idempotency-Key must be 8-200 printable ASCII characters without spaces.',
        );
      const tenantId = request.tenant!.id;
      const { sessionId, message, companyScope, attachments } = request.body;

      // Quota, session, message (it carries the key) and turn job in the group committer's batch (core/chat/send.ts).
      const userId = request.user!.userId;
      const input = {
        tenantId,
        userId,
        idempotencyKey: personalKey(userId, key),
        sessionId,
        message,
        companyScope,
        attachments,
      };
      const result = (await app.jobs.submitBatched(sendBatch, input)).value;
      if (result instanceof SessionNotFoundError) throw new PlatformHttpError(404, 'not_found', result.message);
      const outcome = result;
      if (outcome.kind === 'refused') {
        const status = refusalStatus(outcome.refusal);
        throw new PlatformHttpError(
          status,
          outcome.refusal.code,
          outcome.refusal.message,
          status === 429 ? { 'retry-after': '10' } : {},
        );
      }
      if (outcome.kind === 'conflict')
        throw new PlatformHttpError(
          409,
          'IDEMPOTENCY_KEY_REUSED',
          'This Idempotency-Key was used for a different message; use a new key for new work.',
        );
      if (outcome.kind === 'replayed') reply.header('idempotency-replayed', 'true');
      return reply.code(202).header('location', `/api/chat/jobs/${outcome.body.jobId}`).send(outcome.body);
    },
  );

  app.get(
    '/api/chat/jobs/:jobId',
    {
      ...viewer,
      schema: {
        operationId: 'getChatJob',
        tags: ['chat'],
        summary: 'Status and result of a chat turn',
        security,
        headers: TenantHeaders,
        params: z.object({ jobId: z.uuid() }),
        response: { 200: JobStatus, ...errors },
      },
    },
    async (request) => {
      const job = await findJobInTenant(app.db, request.params.jobId, request.tenant!.id);
      if (!job || job.kind !== CHAT_TURN_KIND) throw new PlatformHttpError(404, 'not_found', 'No such chat job.');
      return toJobStatus(job);
    },
  );
};

export default chatRoutes;
