// Batched fetching (Graphile Worker's localQueue) for a worker whose jobs
// include named queues. One statement picks up a batch of jobs, which saves
// a round trip per job; but Graphile Worker 0.17 may put several jobs of one
// named queue into a batch and run them at once (graphile/worker#621; fixed
// upstream in 0.18, which this project has not moved to yet). That would break
// the order of a chat session's turns.
//
// keepQueuesSerial restores the rule on each batch as it arrives, before any
// of its jobs is handed to a worker: of the jobs of one queue it keeps the
// first (by priority, run_at, id), which holds the queue's lock, and gives
// the others back at once. They become available again, but their queue
// stays locked until the kept job is let go, so they run after it, in order.
// The give-back is a statement of its own: the kept job waits for it before
// it starts (SiblingReturns), or it could finish and let its queue go while
// its siblings were still held here, and a later job of the queue, fetched
// elsewhere, would run before them.
import type { Logger } from 'pino';
import type { Job, WorkerEvents } from 'graphile-worker';

type Queryable = { query: (text: string, values: unknown[]) => Promise<unknown> };

const RETURN_JOBS = `
  update graphile_worker._private_jobs
  set attempts = greatest(0, attempts - 1), locked_by = null, locked_at = null
  where id = any($1::bigint[]) and locked_by = $2::text`;

/** Whether `a` comes before `b` in Graphile's own order (priority, run_at), then by id. */
const before = (a: Job, b: Job) =>
  (a.priority - b.priority || new Date(a.run_at).getTime() - new Date(b.run_at).getTime() || Number(BigInt(a.id) - BigInt(b.id))) < 0;

/** The jobs of `batch` that must wait for an earlier job of their queue in the same batch. */
export function queueSiblings(batch: readonly Job[]): Job[] {
  const first = new Map<string, Job>();
  for (const job of batch) {
    if (job.job_queue_id == null) continue;
    const key = String(job.job_queue_id);
    const kept = first.get(key);
    if (!kept || before(job, kept)) first.set(key, job);
  }
  return batch.filter((job) => job.job_queue_id != null && first.get(String(job.job_queue_id)) !== job);
}

/** The give-backs under way, by queue: the kept job of a batch waits for its queue's. */
export class SiblingReturns {
  private readonly pending = new Map<string, Promise<void>>();

  track(queueIds: Iterable<string>, giveBack: Promise<void>): void {
    for (const id of queueIds) {
      const done = giveBack.finally(() => {
        if (this.pending.get(id) === done) this.pending.delete(id);
      });
      this.pending.set(id, done);
    }
  }

  /** Settles once the siblings of this queue's kept job were given back (at once when there were none). */
  settled(queueId: string): Promise<void> | undefined {
    return this.pending.get(queueId);
  }
}

/**
 * Listens to the runner's batches. `onLost` is told when siblings could not
 * be given back (the database went away): they stay locked by this pool, and
 * the worker recovers them as it does a lost release (workers/worker.ts).
 */
export function keepQueuesSerial(events: WorkerEvents, db: Queryable, logger: Logger, onLost: (error: unknown) => void, returns: SiblingReturns): void {
  events.on('localQueue:getJobs:complete', ({ localQueue, jobs }) => {
    const siblings = queueSiblings(jobs);
    if (siblings.length === 0) return;
    // The batch is the array the local queue goes on to use: take them out
    // before it hands any job to a worker.
    for (const job of siblings) jobs.splice(jobs.indexOf(job), 1);
    const ids = siblings.map((job) => job.id);
    logger.debug({ jobs: ids }, 'batch held later jobs of a queue whose first job it runs; giving them back');
    const giveBack = async (attempt: number): Promise<void> => {
      try {
        await db.query(RETURN_JOBS, [ids, localQueue.workerPool.id]);
      } catch (error) {
        if (attempt >= 5) return onLost(error);
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
        return giveBack(attempt + 1);
      }
    };
    returns.track(new Set(siblings.map((job) => String(job.job_queue_id))), giveBack(0));
  });
}
