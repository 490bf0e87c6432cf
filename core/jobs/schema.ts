// The one JSON shape of a job, shared by every polling route
// (GET /api/jobs/:jobId, /api/chat/jobs/:jobId, /api/channels/:channel/jobs/:jobId)
// and by the websocket, so a client sees the same object either way.
import { z } from 'zod';

// 'cancelling': a running job was asked to stop; its worker ends it as 'cancelled'.
export const JOB_STATUSES = ['queued', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled'] as const;
export const FINAL_JOB_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
export type JobState = (typeof JOB_STATUSES)[number];

export const JobError = z
  .object({
    code: z.string().describe('Stable machine-readable error code'),
    message: z.string().describe('What went wrong, for a person'),
    retrying: z.boolean().optional().describe('True while the job will be attempted again'),
    retryAt: z.iso
      .datetime()
      .optional()
      .describe('When the next attempt is due (a backoff, or the Retry-After the other side sent)'),
  })
  .meta({ id: 'JobError' });

export const JobStatus = z
  .object({
    id: z.uuid(),
    kind: z.string(),
    status: z.enum(JOB_STATUSES),
    attempts: z.int().min(0),
    maxAttempts: z.int().min(1),
    progress: z.unknown().nullable().describe('Task-specific progress while running (for example text so far)'),
    result: z.unknown().nullable().describe('Task-specific result once succeeded'),
    error: JobError.nullable(),
    version: z.int().min(1).describe('Increases with every change; later versions supersede earlier ones'),
    createdAt: z.iso.datetime(),
    startedAt: z.iso.datetime().nullable(),
    finishedAt: z.iso.datetime().nullable(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'JobStatus', description: 'State of an asynchronous job, identical over polling and websocket' });
export type JobStatus = z.infer<typeof JobStatus>;

/** A jobs row as read by SQL or carried by NOTIFY (snake_case). */
export const JobRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  kind: z.string(),
  status: z.enum(JOB_STATUSES),
  attempts: z.number(),
  max_attempts: z.number(),
  progress: z.unknown().nullable(),
  result: z.unknown().nullable(),
  error: z.unknown().nullable(),
  version: z.number(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  updated_at: z.string(),
});
export type JobRow = z.infer<typeof JobRow>;

const iso = (v: string) => new Date(v).toISOString();
const isoOrNull = (v: string | null) => (v === null ? null : iso(v));

export function toJobStatus(row: JobRow): JobStatus {
  return {
    id: row.id,
    kind: row.kind,
    status: row.status,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    progress: row.progress ?? null,
    result: row.result ?? null,
    error: (row.error as JobStatus['error']) ?? null,
    version: row.version,
    createdAt: iso(row.created_at),
    startedAt: isoOrNull(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
    updatedAt: iso(row.updated_at),
  };
}

/** Whether a status (a row's, or one a client read) is final. */
export const isFinal = (status: string) => (FINAL_JOB_STATUSES as readonly string[]).includes(status);

export const JOB_COLUMNS = `id, tenant_id, kind, status, attempts, max_attempts, progress, result, error,
  version, created_at, started_at, finished_at, updated_at`;
