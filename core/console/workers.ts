// Worker processes as their heartbeats tell (core/jobs/liveness.ts): one row
// per Graphile worker id, grouped here by host and pid into processes, with
// the jobs Graphile holds locked under their ids.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

const ProcessRow = z.object({
  hostname: z.string(),
  pid: z.number(),
  version: z.string().nullable(),
  concurrency: z.number().nullable(),
  io_concurrency: z.number().nullable(),
  started_at: z.string(),
  last_seen_at: z.string(),
  seen_s_ago: z.number(),
  ids: z.array(z.string()),
  running: z.array(z.object({ job_id: z.string().nullable(), kind: z.string(), locked_at: z.string() })),
});
export type WorkerProcess = z.infer<typeof ProcessRow> & { stale: boolean };

export async function listWorkerProcesses(db: CommonQueryMethods, staleAfterMs: number): Promise<WorkerProcess[]> {
  const rows = await db.any(sql.type(ProcessRow)`
    with procs as (
      select hostname, pid, max(version) as version, max(concurrency) as concurrency, max(io_concurrency) as io_concurrency,
        min(started_at) as started_at, max(last_seen_at) as last_seen_at, array_agg(worker_id order by worker_id) as ids
      from worker_heartbeats group by hostname, pid
    )
    select p.hostname, p.pid, p.version, p.concurrency, p.io_concurrency, p.started_at, p.last_seen_at,
      extract(epoch from now() - p.last_seen_at)::float8 as seen_s_ago, p.ids,
      coalesce((select json_agg(json_build_object('job_id', j.id, 'kind', j.kind, 'locked_at', coalesce(j.started_at, j.updated_at)) order by j.updated_at)
        from jobs j where j.status in ('queued', 'running', 'cancelling')
          and j.status <> 'queued' and j.locked_by = any(p.ids)), '[]'::json) as running
    from procs p
    order by p.hostname, p.started_at, p.pid`);
  return rows.map((r) => ({ ...r, stale: r.seen_s_ago * 1000 > staleAfterMs }));
}
