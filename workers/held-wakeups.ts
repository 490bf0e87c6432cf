// The wake-ups a lane's local queue holds when its runner stops. Graphile
// Worker 0.18 cannot release a local queue that holds fetched jobs (its
// WAITING mode): it marks itself released, then starts returning them in
// the background, which a released queue refuses ("Cannot background
// something when the queue is already released"); the graceful stop then
// fails and the pool stops by force. So a lane takes the held jobs off its
// queue right before the stop (the emptied queue starts a fetch, and a
// release during a fetch is clean: Graphile returns what that fetch brings),
// and gives them back once its runner stopped, as Graphile's own return
// does: unlocked, their attempt not spent (a platform job's attempt number
// is its wake-up's, workers/tickets.ts).
import type { Job, WorkerEventMap } from 'graphile-worker';
import type pg from 'pg';

export type LocalQueue = WorkerEventMap['localQueue:init']['localQueue'];

/**
 * Takes the jobs `queue` holds for its busy slots. Call in the same tick as
 * the runner's stop: the emptied queue is fetching until then.
 */
export function takeHeld(queue: LocalQueue | null): Job[] {
  const held: Job[] = [];
  // With jobs held, getJob hands one over at once (no promise).
  while (queue?.mode === 'WAITING' && queue.jobQueue.length > 0)
    held.push(queue.getJob(queue.workerPool.id, null) as Job);
  return held;
}

/**
 * Gives `jobs` back to the queue once the runner of Graphile pool `poolId`
 * stopped: nothing of that pool runs any more, so all it still locks is
 * unlocked, and each job gets back the attempt its fetch counted.
 */
export async function giveBack(pgPool: pg.Pool, poolId: string, jobs: readonly Job[]): Promise<void> {
  if (jobs.length === 0) return;
  const client = await pgPool.connect();
  try {
    await client.query('begin');
    await client.query('select graphile_worker.force_unlock_workers($1::text[])', [[poolId]]);
    await client.query(
      `select from unnest($1::bigint[], $2::int[]) as held(id, attempts),
         lateral graphile_worker.reschedule_jobs(array[held.id], attempts => held.attempts)`,
      [jobs.map((job) => job.id), jobs.map((job) => Math.max(0, job.attempts - 1))],
    );
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
