// Enqueue is transactional: the platform `jobs` rows that clients poll and the
// Graphile Worker jobs that run them are written by one statement inside the
// caller's transaction, so both commit or neither does. Each job gets its
// place in the fair order of its pool (fair_run_at, migration 0037) as its
// run_at; a job given its own runAt keeps it.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { poolOf } from './pools.ts';
import { asQueueLimitError } from './quota.ts';

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
  /** The chat session the job works for (a turn, a delivery of its answer): listed in the session's activity. */
  sessionId?: string;
  /**
   * Work a person or an agent asked for, which counts against the account's
   * limit of unfinished jobs (plan_limits.max_open_jobs): over it, the
   * enqueue throws QueueLimitError and the transaction writes nothing.
   * Follow-up work of the platform (a reply's delivery, a webhook) is never refused.
   */
  quota?: boolean;
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

/**
 * The Graphile Worker flag of a job whose run_at is its fair start tag (a
 * worker that starts it moves its pool's service position, workers/fair-clock.ts).
 */
export const FAIR_FLAG = 'fair';

/** The `jobs` rows and the Graphile Worker job specs of these jobs (enqueueJobs writes them; core/chat/send.ts too). */
export function jobRecords(specs: readonly JobSpec[]) {
  const rows = specs.map((spec) => ({
    id: spec.id ?? randomUUID(),
    tenant_id: spec.tenantId,
    kind: spec.kind,
    queue_name: spec.queueName ?? null,
    max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    session_id: spec.sessionId ?? null,
  }));
  const workerSpecs = specs.map((spec, i) => ({
    identifier: spec.kind,
    payload: { jobId: rows[i]!.id, tenantId: spec.tenantId, input: spec.input ?? {} } satisfies TaskEnvelope,
    queue_name: spec.queueName ?? null,
    run_at: spec.runAt?.toISOString() ?? null,
    max_attempts: spec.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    job_key: null,
    priority: spec.priority ?? null,
    flags: spec.runAt ? null : [FAIR_FLAG],
  }));
  return { rows, workerSpecs };
}

/**
 * Inserts the jobs rows and the Graphile Worker jobs in one round trip, inside
 * the transaction (or connection) it is given. Call it from a transaction.
 */
export async function enqueueJobs(tx: CommonQueryMethods, specs: readonly JobSpec[]): Promise<EnqueuedJob[]> {
  if (specs.length === 0) return [];
  const { rows, workerSpecs } = jobRecords(specs);
  // Jobs without a runAt of their own take a start tag in their pool's fair
  // order ("f" is the spec's position among those).
  const fairTenants: string[] = [];
  const fairPools: string[] = [];
  const tagged = workerSpecs.map((spec, i) => {
    if (specs[i]!.runAt) return spec;
    fairTenants.push(specs[i]!.tenantId);
    fairPools.push(poolOf(specs[i]!.kind));
    return { ...spec, f: fairTenants.length };
  });
  // Jobs that count against the account's limit: the room is checked with the
  // account's counter locked, in this statement (check_open_job_room, 0037).
  const limited = specs.filter((spec) => spec.quota).map((spec) => spec.tenantId);
  // add_jobs() first: each row records its Graphile job (0028), which a
  // cancel takes out of the queue. The final select reads every CTE, so all run.
  await tx.query(sql.unsafe`
    with room as (
      select check_open_job_room(${sql.array(limited, 'uuid')}) as checked
    ), tags as (
      select i, run_at from fair_run_at(${sql.array(fairTenants, 'uuid')}, ${sql.array(fairPools, 'text')})
    ), added as (
      select id, (payload->>'jobId')::uuid as job_id from graphile_worker.add_jobs(array(
        select json_populate_record(null::graphile_worker.job_spec,
          case when t.run_at is null then spec else (spec::jsonb || jsonb_build_object('run_at', t.run_at))::json end)
        from json_array_elements(${sql.json(tagged as never)}) as spec
        left join tags t on t.i = (spec->>'f')::bigint
      ))
    ), inserted as (
      insert into jobs (id, tenant_id, kind, queue_name, max_attempts, session_id, graphile_job_id)
      select r.id, r.tenant_id, r.kind, r.queue_name, r.max_attempts, r.session_id, added.id
      from jsonb_to_recordset(${sql.jsonb(rows)})
        as r(id uuid, tenant_id uuid, kind text, queue_name text, max_attempts integer, session_id uuid)
      left join added on added.job_id = r.id
      returning 1
    )
    select (select count(*) from inserted) as inserted, (select count(*) from room) as checked`).catch((error: unknown) => {
    throw asQueueLimitError(error) ?? error;
  });
  return rows.map((r) => ({ id: r.id, kind: r.kind, status: 'queued' as const }));
}

export async function enqueueJob(tx: CommonQueryMethods, spec: JobSpec): Promise<EnqueuedJob> {
  const [job] = await enqueueJobs(tx, [spec]);
  return job!;
}
