// The tenant's agents and their sessions: agents with their last activity,
// sessions by filter, and one session's messages and job events in order.
import { z } from 'zod';
import { listActivityAgents } from '../../../core/activity/lists.ts';
import { listActivitySessions, listSessionEntries, sessionInTenant } from '../../../core/activity/sessions.ts';
import { PlatformHttpError } from '../../errors.ts';
import { type ActivityApp, type ActivityRouteContext, paging } from './context.ts';
import { ActivityAgentPage, ActivitySessionPage, Page, SessionEntryPage, SessionsQuery } from './schemas.ts';

export function registerActivitySessionRoutes(app: ActivityApp, context: ActivityRouteContext): void {
  registerAgentListRoute(app, context);
  registerSessionListRoute(app, context);
  registerSessionEntryRoute(app, context);
}

function registerAgentListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
  app.get(
    '/api/activity/agents',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityAgents',
        summary: 'Agents with their last activity and counts of sessions, messages and jobs',
        querystring: Page,
        response: { 200: ActivityAgentPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const page = await listActivityAgents(app.db, request.tenant!.id, request.query.limit, request.query.cursor);
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((a) => ({
            id: a.id,
            name: a.name,
            model: a.model,
            isDefault: a.is_default,
            createdAt: a.created_at,
            sessions: a.sessions,
            messages: a.messages,
            jobs: a.jobs,
            lastActivityAt: a.last_activity_at,
          })),
        };
      }),
  );
}

function registerSessionListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
  app.get(
    '/api/activity/sessions',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivitySessions',
        summary: 'Sessions, newest first, filtered by agent, status and creation time',
        querystring: SessionsQuery,
        response: { 200: ActivitySessionPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const { limit, cursor, ...filter } = request.query;
        if (filter.from && filter.to && Date.parse(filter.from) > Date.parse(filter.to))
          throw new PlatformHttpError(400, 'invalid_request', 'Invalid request: query.from: after query.to.');
        const page = await listActivitySessions(app.db, request.tenant!.id, filter, limit, cursor);
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((s) => ({
            id: s.id,
            title: s.title,
            agentId: s.agent_id,
            agentName: s.agent_name,
            model: s.model,
            status: s.state,
            lastJobStatus: s.last_job_status,
            messages: s.messages,
            createdAt: s.created_at,
            updatedAt: s.updated_at,
          })),
        };
      }),
  );
}

function registerSessionEntryRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
  app.get(
    '/api/activity/sessions/:id/entries',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivitySessionEntries',
        summary:
          "A session's messages and job events (turn queued, started, progress, finished; channel deliveries) in order",
        params: z.object({ id: z.uuid() }),
        querystring: Page,
        response: { 200: SessionEntryPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        if (!(await sessionInTenant(app.db, request.tenant!.id, request.params.id)))
          throw new PlatformHttpError(404, 'not_found', 'No such session in this tenant.');
        const page = await listSessionEntries(
          app.db,
          request.tenant!.id,
          request.params.id,
          request.query.limit,
          request.query.cursor,
        );
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((e) =>
            e.type === 'message'
              ? {
                  type: e.type,
                  at: e.at,
                  message: {
                    id: e.message.id,
                    role: e.message.role,
                    content: e.message.content,
                    attachments: e.message.attachments,
                    model: e.message.model,
                    jobId: e.message.job_id,
                  },
                }
              : {
                  type: e.type,
                  at: e.at,
                  job: {
                    jobId: e.job.job_id,
                    kind: e.job.job_kind,
                    event: e.job.event as never,
                    attempt: e.job.attempt,
                    status: e.job.status,
                    progress: e.job.progress ?? null,
                    error: e.job.error ?? null,
                  },
                },
          ),
        };
      }),
  );
}
