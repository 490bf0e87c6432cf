// The other activity lists: files, skills, scheduled runs and teams
// (companies with their agents), each newest first in keyset pages.
import { listActivitySkills, listActivityTeams } from '../../../core/activity/lists.ts';
import { listActivityCronRuns, listActivityFiles } from '../../../core/activity/merged.ts';
import { toSkill } from '../skills/schemas.ts';
import { type ActivityApp, type ActivityRouteContext, paging } from './context.ts';
import {
  ActivityCronRunPage,
  ActivityFilePage,
  ActivitySkillPage,
  ActivityTeamPage,
  CronQuery,
  FilesQuery,
  Page,
} from './schemas.ts';

export function registerActivityListRoutes(app: ActivityApp, context: ActivityRouteContext): void {
  registerFileListRoute(app, context);
  registerSkillListRoute(app, context);
  registerCronRunListRoute(app, context);
  registerTeamListRoute(app, context);
}

function registerFileListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
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
}

function registerSkillListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
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
}

function registerCronRunListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
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
}

function registerTeamListRoute(app: ActivityApp, { viewer, errors, common }: ActivityRouteContext): void {
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
}
