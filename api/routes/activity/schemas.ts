import { z } from 'zod';
import { SESSION_STATES } from '../../../core/activity/sessions.ts';
import { CRON_SOURCES } from '../../../core/activity/merged.ts';
import { Skill, SkillConfig } from '../skills/schemas.ts';

export const Page = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('Page size, 1-100'),
  cursor: z.string().min(1).max(500).optional().describe('Opaque cursor from the previous page'),
});
const paged = <T extends z.ZodType>(item: T, id: string) =>
  z.object({ items: z.array(item), nextCursor: z.string().nullable() }).meta({ id });

export const ActivityAgent = z
  .object({
    id: z.uuid(),
    name: z.string(),
    model: z.string(),
    isDefault: z.boolean(),
    createdAt: z.iso.datetime(),
    sessions: z.int(),
    messages: z.int(),
    jobs: z.int(),
    lastActivityAt: z.iso.datetime().nullable().describe('Latest change of any of its sessions'),
  })
  .meta({ id: 'ActivityAgent' });
export const ActivityAgentPage = paged(ActivityAgent, 'ActivityAgentPage');

export const SessionsQuery = Page.extend({
  agentId: z.uuid().optional(),
  status: z
    .enum(SESSION_STATES)
    .optional()
    .describe('active: its latest job is queued or running; failed: it failed; idle: otherwise'),
  from: z.iso.datetime({ offset: true }).optional().describe('Sessions created at or after'),
  to: z.iso.datetime({ offset: true }).optional().describe('Sessions created before'),
});
export const ActivitySession = z
  .object({
    id: z.uuid(),
    title: z.string(),
    agentId: z.uuid().nullable(),
    agentName: z.string().nullable(),
    model: z.string().nullable(),
    status: z.enum(SESSION_STATES),
    lastJobStatus: z.string().nullable(),
    messages: z.int(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'ActivitySession' });
export const ActivitySessionPage = paged(ActivitySession, 'ActivitySessionPage');

export const SessionEntry = z
  .object({
    type: z.enum(['message', 'job']),
    at: z.iso.datetime(),
    message: z
      .object({
        id: z.uuid(),
        role: z.string(),
        content: z.string(),
        attachments: z.array(z.unknown()),
        model: z.string().nullable(),
        jobId: z.uuid().nullable(),
      })
      .optional(),
    job: z
      .object({
        jobId: z.uuid(),
        kind: z.string().describe('chat.turn, a channel delivery ...'),
        event: z.enum(['queued', 'started', 'progress', 'cancelling', 'succeeded', 'failed', 'cancelled']),
        attempt: z.int(),
        status: z.string().nullable().describe("The job's status now"),
        progress: z.unknown().nullable(),
        error: z.unknown().nullable(),
      })
      .optional(),
  })
  .meta({ id: 'ActivitySessionEntry' });
export const SessionEntryPage = paged(SessionEntry, 'ActivitySessionEntryPage');

export const ActivityTool = z
  .object({
    tool: z.string().describe('agent:<operationId>, skill:<name> or skill-tool:<name>'),
    kind: z.enum(['agent_operation', 'skill', 'skill_tool']),
    name: z.string(),
    description: z.string(),
    skills: z.array(z.string()).describe('Skills that declare it (skill tools)'),
    uses: z.int(),
    lastUsedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ActivityTool' });
export const ActivityToolPage = paged(ActivityTool, 'ActivityToolPage');

export const FilesQuery = Page.extend({ source: z.enum(['memory', 'attachment']).optional() });
export const ActivityFile = z
  .object({
    source: z.enum(['memory', 'attachment']),
    name: z.string(),
    mediaType: z.string().nullable(),
    bytes: z.int().nullable(),
    sessionId: z.uuid().nullable(),
    messageId: z.uuid().nullable(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ActivityFile' });
export const ActivityFilePage = paged(ActivityFile, 'ActivityFilePage');

export const ActivitySkill = Skill.extend({ uses: z.int(), configuration: SkillConfig }).meta({ id: 'ActivitySkill' });
export const ActivitySkillPage = paged(ActivitySkill, 'ActivitySkillPage');

export const CronQuery = Page.extend({
  source: z
    .enum(CRON_SOURCES)
    .optional()
    .describe("platform: the service's scheduled tasks; tenant: runs posted to /api/usage/cron-runs"),
  status: z.enum(['running', 'succeeded', 'failed', 'skipped']).optional(),
});
export const ActivityCronRun = z
  .object({
    source: z.enum(CRON_SOURCES),
    id: z.string(),
    name: z.string(),
    task: z.string().nullable(),
    status: z.string(),
    startedAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
    durationMs: z.int().nullable(),
    detail: z.unknown().nullable().describe("The tenant's own runs only"),
  })
  .meta({ id: 'ActivityCronRun' });
export const ActivityCronRunPage = paged(ActivityCronRun, 'ActivityCronRunPage');

export const ActivityTeam = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    createdAt: z.iso.datetime(),
    agentCount: z.int(),
    agents: z.array(
      z.object({ id: z.uuid(), name: z.string(), role: z.string(), model: z.string(), status: z.string() }),
    ),
  })
  .meta({ id: 'ActivityTeam' });
export const ActivityTeamPage = paged(ActivityTeam, 'ActivityTeamPage');
