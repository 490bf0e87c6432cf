// Enqueue is transactional: the platform `jobs` rows that clients poll and the
// Graphile Worker jobs that run them are written by one statement inside the
// caller's transaction, so both commit or neither does.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export type JobSpec = {
  /** Task identifier, e.g. 'chat.turn'; a file of the same name lives in workers/tasks/. */
  kind: string;
  tenantId: string;
  /** Task input, kept small: large data belongs in its own table. */
  input?: Record<string, unknown>;
  /**
   * Jobs that share a queue name run one at a time, in order (one chat
   * session, one channel). Keep the cardinality bounded and never combine it
   * with Graphile Worker's localQueue, which breaks serial queues.
   */
  queueName?: string;
  runAt?: Date;
  maxAttempts?: number;
  priority?: number;
  /** Pre-assigned id, for callers that must know it before enqueueing. */
  id?: string;
};

/** What Graphile Worker hands to a task: the platform job id and the input. */
export const TaskEnvelope = z.object({
  jobId: z.uuid(),
  tenantId: z.uuid(),
  input: z.record(z.string(), z.unknown()).default({}),
});
export type TaskEnvelope = z.infer<typeof TaskEnvelope>;

export type EnqueuedJob = { id: string; kind: string; status: 'queued' };

const DEFAULT_MAX_ATTEMPTS = 10;

/** Jobs as the two JSON documents the enqueue SQL reads: our rows and Graphile's job specs. */
export function prepareJobs(specs: readonly JobSpec[]) {
  const rows = specs.map((spec) => ({
    id: spec.id ?? randomUUID(),
    tenant_id: spec.tenantId,
    kind: spec.kind,
    queue_name: spec.queueName ?? null,
    max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
  }));
  const workerSpecs = specs.map((spec, i) => ({
    identifier: spec.kind,
    payload: { jobId: rows[i]!.id, tenantId: spec.tenantId, input: spec.input ?? {} } satisfies TaskEnvelope,
    queue_name: spec.queueName ?? null,
    run_at: spec.runAt?.toISOString() ?? null,
    max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    job_key: null,
    priority: spec.priority ?? null,
    flags: null,
  }));
  return { rows, workerSpecs };
}

/**
 * Two CTEs, `jobs_inserted` and `jobs_added`, that write the prepared jobs
 * (only those whose id `chosen` selects, when given) as part of a larger
 * statement. The statement's final select must read from both, or PostgreSQL
 * skips add_jobs().
 */
export function enqueueCtes(prepared: ReturnType<typeof prepareJobs>, chosen?: ReturnType<typeof sql.fragment>) {
  const rowFilter = chosen ? sql.fragment`where r.id in (${chosen})` : sql.fragment``;
  const specFilter = chosen ? sql.fragment`where (spec->'payload'->>'jobId')::uuid in (${chosen})` : sql.fragment``;
  return sql.fragment`
    jobs_inserted as (
      insert into jobs (id, tenant_id, kind, queue_name, max_attempts)
      select r.id, r.tenant_id, r.kind, r.queue_name, r.max_attempts
      from jsonb_to_recordset(${sql.jsonb(prepared.rows)})
        as r(id uuid, tenant_id uuid, kind text, queue_name text, max_attempts integer)
      ${rowFilter}
      returning 1
    ), jobs_added as (
      select 1 from graphile_worker.add_jobs(array(
        select json_populate_record(null::graphile_worker.job_spec, spec)
        from json_array_elements(${sql.json(prepared.workerSpecs as never)}) as spec
        ${specFilter}
      ))
    )`;
}

/**
 * Inserts the jobs rows and the Graphile Worker jobs in one round trip, inside
 * the transaction (or connection) it is given. Call it from a transaction.
 */
export async function enqueueJobs(tx: CommonQueryMethods, specs: readonly JobSpec[]): Promise<EnqueuedJob[]> {
  if (specs.length === 0) return [];
  const prepared = prepareJobs(specs);
  await tx.query(sql.unsafe`
    with ${enqueueCtes(prepared)}
    select (select count(*) from jobs_inserted) as inserted, (select count(*) from jobs_added) as added`);
  return prepared.rows.map((r) => ({ id: r.id, kind: r.kind, status: 'queued' as const }));
}

export async function enqueueJob(tx: CommonQueryMethods, spec: JobSpec): Promise<EnqueuedJob> {
  const [job] = await enqueueJobs(tx, [spec]);
  return job!;
}
