// Dead-worker recovery. Graphile Worker only unlocks a crashed worker's jobs
// after 4 hours. Each of our worker processes keeps a heartbeat row per
// Graphile worker id; the sweep unlocks jobs held by ids whose heartbeat went
// stale (or that never had one), so the jobs of a SIGKILLed worker run again
// within seconds.
import { hostname } from 'node:os';
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { PLATFORM_VERSION } from '../version.ts';

/** What a worker process tells about itself (shown in the console). */
export type WorkerInfo = { concurrency: number; ioConcurrency: number };

export async function beatHeart(
  db: CommonQueryMethods,
  poolId: string,
  workerIds: readonly string[],
  info?: WorkerInfo,
): Promise<void> {
  if (workerIds.length === 0) return;
  await db.query(sql.unsafe`
    insert into worker_heartbeats (worker_id, pool_id, hostname, pid, version, concurrency, io_concurrency)
    select unnest(${sql.array(workerIds, 'text')}), ${poolId}, ${hostname()}, ${process.pid},
      ${PLATFORM_VERSION}, ${info?.concurrency ?? null}, ${info?.ioConcurrency ?? null}
    on conflict (worker_id) do update set last_seen_at = now()`);
}

export async function forgetWorkers(db: CommonQueryMethods, workerIds: readonly string[]): Promise<void> {
  if (workerIds.length === 0) return;
  await db.query(sql.unsafe`delete from worker_heartbeats where worker_id = any(${sql.array(workerIds, 'text')})`);
}

export type SweepResult = { unlockedWorkers: string[]; requeuedJobs: number };

export async function sweepDeadWorkers(db: DatabasePool, staleAfterMs: number): Promise<SweepResult> {
  return db.transaction(async (tx) => {
    const stale = sql.fragment`now() - make_interval(secs => ${staleAfterMs / 1000})`;
    // Nobody could beat while the server was down: right after a restart every
    // heartbeat looks stale. Judge none before the workers had time to beat again.
    const justStarted = await tx.oneFirst(sql.type(z.object({ recent: z.boolean() }))`
      select pg_postmaster_start_time() > ${stale} as recent`);
    if (justStarted) return { unlockedWorkers: [], requeuedJobs: 0 };
    const dead = await tx.anyFirst(sql.type(z.object({ worker_id: z.string() }))`
      with gone as (
        delete from worker_heartbeats where last_seen_at < ${stale} returning worker_id
      )
      select worker_id from gone
      union
      select distinct j.locked_by from graphile_worker.jobs j
      where j.locked_by is not null and j.locked_at < ${stale}
        and not exists (select 1 from worker_heartbeats h where h.worker_id = j.locked_by and h.last_seen_at >= ${stale})`);
    if (dead.length === 0) return { unlockedWorkers: [], requeuedJobs: 0 };
    return { unlockedWorkers: [...dead], requeuedJobs: await releaseWorkerJobs(tx, dead) };
  });
}

/**
 * Gives the jobs held by these Graphile worker pool ids back to the queue.
 * Only for ids whose handlers have stopped (a dead process, or a pool the
 * worker itself stopped): clients are told the attempt was lost and the next
 * attempt sets it running again; a job that was asked to stop ends as
 * cancelled; a serial queue's job queued again wakes its queue; Graphile's
 * own locks go with graphile_worker.force_unlock_workers. Returns how many
 * platform jobs were queued again.
 */
export async function releaseWorkerJobs(tx: CommonQueryMethods, workerIds: readonly string[]): Promise<number> {
  const ids = sql.array(workerIds, 'text');
  await tx.query(sql.unsafe`
    update jobs set status = 'cancelled', finished_at = now(), error = null
    where status = 'cancelling' and locked_by = any(${ids})`);
  const requeued = await tx.query(sql.unsafe`
    update jobs set status = 'queued',
      error = '{"code":"worker_lost","message":"The worker running this job stopped; it will run again.","retrying":true}'::jsonb
    where status = 'running' and locked_by = any(${ids})`);
  await tx.query(sql.unsafe`select graphile_worker.force_unlock_workers(${ids})`);
  return requeued.rowCount;
}

/**
 * Wakes unfinished jobs that have no wake-up in Graphile's queue any more
 * (jobs_rewake_orphans, migration 0043): a safety net behind every other
 * path, so a job never stays queued for good. How many it woke.
 */
export async function rewakeOrphans(db: CommonQueryMethods): Promise<number> {
  return db.oneFirst(sql.type(z.object({ n: z.number() }))`select jobs_rewake_orphans() as n`);
}
