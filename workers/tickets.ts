// What a Graphile Worker job stands for (docs/engine.md): a wake-up. Its
// payload names a platform job ({jobId, base}), which runs if one read finds
// it open and due (that read brings its input), or a serial queue ({queue, tenantId}),
// whose next job runs if this worker pool claims it. Either way the job's
// state lives in the platform's own rows, so a wake-up that finds nothing to
// do (a stale or a repeated one) simply ends.
import type { JobHelpers, Task } from 'graphile-worker';
import { QueueEnvelope, TaskEnvelope } from '../core/jobs/enqueue.ts';
import { waitJob } from '../core/jobs/lifecycle.ts';
import { lazyChild } from '../core/logger.ts';
import { durableFor, runAttempt } from './attempt.ts';
import type { PlatformTask, TaskDeps } from './define-task.ts';

/** How long a job of a kind this worker does not run waits before a worker looks again. */
const UNKNOWN_KIND_WAIT_MS = 60_000;

/** The Graphile task of every platform kind: `tasks` are all the kinds this worker runs. */
export function ticketTask(tasks: ReadonlyMap<string, PlatformTask>, deps: TaskDeps): Task {
  return async (payload, helpers) => {
    const queue = QueueEnvelope.safeParse(payload);
    if (queue.success) return runQueue(queue.data.queue, tasks, deps, helpers);
    const envelope = TaskEnvelope.safeParse(payload);
    if (!envelope.success) {
      // Nothing to report to: without a job id there is no platform job.
      deps.logger.error(
        { kind: helpers.job.task_identifier, graphileJobId: helpers.job.id },
        'refused a job without a platform job row (added with graphile_worker.add_job directly?): enqueue with enqueueJob() from core/jobs/enqueue.ts so clients can follow it; dropping it',
      );
      deps.refused(helpers.job.task_identifier, 'no_platform_job');
      return;
    }
    const { jobId, base } = envelope.data;
    const logger = lazyChild(deps.logger, { kind: helpers.job.task_identifier, jobId });
    const start = await durableFor(logger, helpers.abortSignal)(() => deps.completions.open(jobId));
    if (start.state === 'serial') return runQueue(start.queue, tasks, deps, helpers);
    if (start.state !== 'run') {
      logger.debug(
        { state: start.state },
        start.state === 'later'
          ? 'woken before its time; its own wake-up comes then'
          : 'job is final or gone; nothing to run',
      );
      return;
    }
    const task = tasks.get(helpers.job.task_identifier)!;
    await runAttempt(
      task,
      {
        jobId,
        tenantId: start.tenantId,
        kind: task.kind,
        input: start.input,
        attempt: base + helpers.job.attempts,
        maxAttempts: base + helpers.job.max_attempts,
      },
      deps,
      helpers,
    );
  };
}

/** A queue's wake-up: claim its next job for this worker pool and run it, or end when it is not this one's turn. */
async function runQueue(
  queue: string,
  tasks: ReadonlyMap<string, PlatformTask>,
  deps: TaskDeps,
  helpers: JobHelpers,
): Promise<void> {
  const logger = lazyChild(deps.logger, { queue });
  const holder = helpers.job.locked_by ?? `graphile-job-${helpers.job.id}`;
  const claim = await durableFor(logger, helpers.abortSignal)(() => deps.completions.claim(queue, holder));
  if (claim.outcome !== 'claimed') {
    logger.debug({ outcome: claim.outcome }, 'queue woken; nothing of it to run here now');
    return;
  }
  const task = tasks.get(claim.kind);
  if (!task) {
    // A kind of another version of the platform: let it go for a worker that runs it.
    logger.error(
      { kind: claim.kind, jobId: claim.jobId },
      'claimed a job of a kind this worker does not run; it waits for a worker that does',
    );
    await waitJob(deps.db, {
      jobId: claim.jobId,
      attempt: claim.attempt,
      keepAttempt: true,
      until: new Date(Date.now() + UNKNOWN_KIND_WAIT_MS),
    });
    return;
  }
  await runAttempt(task, { ...claim, running: true }, deps, helpers);
}
