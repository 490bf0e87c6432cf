// Activity (Tenant + Viewer, GET only): what the tenant's agents did, read
// from the tables that record it, keyset-paged. /api/activity/channels lives
// with the channels (api/routes/channels).
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { InvalidActivityCursorError } from '../../../core/activity/cursor.ts';
import { listActivityAgents, listActivitySkills, listActivityTeams } from '../../../core/activity/lists.ts';
import { listActivityCronRuns, listActivityFiles, toolUses } from '../../../core/activity/merged.ts';
import { listActivitySessions, listSessionEntries, sessionInTenant } from '../../../core/activity/sessions.ts';
import { listSkills } from '../../../core/skills/skills.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { agentOperations } from '../agent/operations.ts';
import { toSkill } from '../skills/schemas.ts';
import {
  ActivityAgentPage,
  ActivityCronRunPage,
  ActivityFilePage,
  ActivitySessionPage,
  ActivitySkillPage,
  ActivityTeamPage,
  ActivityToolPage,
  CronQuery,
  FilesQuery,
  Page,
  SessionEntryPage,
  SessionsQuery,
} from './schemas.ts';

const badCursor = () =>
  new PlatformHttpError(400, 'invalid_request', 'Invalid request: query.cursor: not a cursor from this list.');
async function paging<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidActivityCursorError) throw badCursor();
    throw error;
  }
}

const activityRoutes: FastifyPluginAsyncZod = async (app) => {
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const common = { tags: ['activity'], security: [{ PlatformJWT: [] }], headers: TenantHeaders };

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

  app.get(
    '/api/activity/tools',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityTools',
        summary:
          "Tools the tenant's agents can use (Agent API/MCP operations, published skills and the tools they declare) with use counts",
        querystring: Page,
        response: { 200: ActivityToolPage, ...errors },
      },
    },
    async (request) => {
      const tenantId = request.tenant!.id;
      const [uses, skills] = await Promise.all([toolUses(app.db, tenantId), listSkills(app.db, tenantId, 'published')]);
      const declared = new Map<string, string[]>();
      for (const s of skills)
        for (const tool of s.allowed_tools) declared.set(tool, [...(declared.get(tool) ?? []), s.name]);
      const all = [
        ...agentOperations.map((op) => ({
          tool: `agent:${op.operationId}`,
          kind: 'agent_operation' as const,
          name: op.operationId,
          description: op.summary,
          skills: [] as string[],
        })),
        ...skills.map((s) => ({
          tool: `skill:${s.name}`,
          kind: 'skill' as const,
          name: s.name,
          description: s.description,
          skills: [s.name],
        })),
        ...[...declared].map(([tool, by]) => ({
          tool: `skill-tool:${tool}`,
          kind: 'skill_tool' as const,
          name: tool,
          description: `Declared by ${by.join(', ')}`,
          skills: by,
        })),
      ].sort((a, b) => (a.tool < b.tool ? -1 : 1));
      let after: string | null = null;
      if (request.query.cursor) {
        after = Buffer.from(request.query.cursor, 'base64url').toString('utf8');
        if (!/^(agent|skill|skill-tool):\S{1,200}$/.test(after)) throw badCursor();
      }
      const rest = after === null ? all : all.filter((x) => x.tool > after);
      const items = rest
        .slice(0, request.query.limit)
        .map((x) => ({ ...x, uses: uses.get(x.tool)?.uses ?? 0, lastUsedAt: uses.get(x.tool)?.last_used_at ?? null }));
      return {
        items,
        nextCursor: rest.length > request.query.limit ? Buffer.from(items.at(-1)!.tool).toString('base64url') : null,
      };
    },
  );

  app.get(
    '/api/activity/files',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityFiles',
        summary: 'Memory files and message attachments, newest first',
        querystring: FilesQuery,
        response: { 200: ActivityFilePage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const page = await listActivityFiles(
          app.db,
          request.tenant!.id,
          request.query.source,
          request.query.limit,
          request.query.cursor,
        );
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((f) => ({
            source: f.source,
            name: f.name,
            mediaType: f.media_type,
            bytes: f.bytes,
            sessionId: f.session_id,
            messageId: f.message_id,
            createdAt: f.created_at,
            updatedAt: f.updated_at,
          })),
        };
      }),
  );

  app.get(
    '/api/activity/skills',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivitySkills',
        summary: 'Synced skills with their published and configuration state and use counts',
        querystring: Page,
        response: { 200: ActivitySkillPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const page = await listActivitySkills(app.db, request.tenant!.id, request.query.limit, request.query.cursor);
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((s) => ({ ...toSkill(s.skill), uses: s.uses, configuration: s.configuration })),
        };
      }),
  );

  app.get(
    '/api/activity/cron-jobs',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityCronJobs',
        summary:
          "Scheduled runs: the platform's recorded runs and the tenant's own (POST /api/usage/cron-runs), newest first",
        querystring: CronQuery,
        response: { 200: ActivityCronRunPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const { limit, cursor, ...filter } = request.query;
        const page = await listActivityCronRuns(app.db, request.tenant!.id, filter, limit, cursor);
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((r) => ({
            source: r.source,
            id: r.id,
            name: r.name,
            task: r.task,
            status: r.status,
            startedAt: r.started_at,
            finishedAt: r.finished_at,
            durationMs: r.duration_ms,
            detail: r.detail ?? null,
          })),
        };
      }),
  );

  app.get(
    '/api/activity/teams',
    {
      ...viewer,
      schema: {
        ...common,
        operationId: 'listActivityTeams',
        summary: 'Companies with their agents, newest first',
        querystring: Page,
        response: { 200: ActivityTeamPage, ...errors },
      },
    },
    async (request) =>
      paging(async () => {
        const page = await listActivityTeams(app.db, request.tenant!.id, request.query.limit, request.query.cursor);
        return {
          nextCursor: page.nextCursor,
          items: page.items.map((c) => ({
            id: c.id,
            name: c.name,
            description: c.description,
            createdAt: c.created_at,
            agentCount: c.agent_count,
            agents: c.agents,
          })),
        };
      }),
  );
};

export default activityRoutes;
