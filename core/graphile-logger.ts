// Graphile Worker logs through pino like the rest of the platform. Its job
// objects are cut down to identity and attempt: payloads may carry user
// content and never belong in a log line.
import { Logger as WorkerLogger } from 'graphile-worker';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from './db/unavailable.ts';

type JobLike = {
  id?: unknown;
  task_identifier?: unknown;
  attempts?: unknown;
  max_attempts?: unknown;
  queue_name?: unknown;
};

function summarizeJob(job: JobLike) {
  return { id: job.id, task: job.task_identifier, attempts: job.attempts, maxAttempts: job.max_attempts };
}

export function graphileLogger(logger: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const fields: Record<string, unknown> = { ...scope, ...(meta ?? {}) };
    if (fields.job && typeof fields.job === 'object') fields.job = summarizeJob(fields.job as JobLike);
    // The I/O pool runs a thousand slots on a few connections, and fetches a
    // few jobs at a time, on purpose: its jobs wait on the outside world, and a
    // full process would hold a large batch until its slots free (workers/lanes.ts).
    if (message.startsWith('WARNING: having maxPoolSize') || message.startsWith('Your job batch size')) {
      logger.debug(fields, message);
      return;
    }
    // Its LISTEN connection broke (PostgreSQL restarted, the connection
    // was ended): Graphile reconnects by itself, and says so as an error.
    // A warning, in one line with the cause.
    if (
      message.startsWith('Error with notify listener') ||
      message.startsWith('Error occurred attempting to UNLISTEN')
    ) {
      logger.warn({ reason: message.split('\n')[0] }, 'graphile worker: its LISTEN connection broke; reconnecting');
      return;
    }
    // Graphile gave up recording a batch of finished or failed jobs while
    // PostgreSQL was away: the worker restarts its pools on the event
    // (workers/worker.ts) and the jobs run again. A warning, in one line.
    if (
      level === 'error' &&
      /^Failed to (complete|fail) jobs\b/.test(message) &&
      isDatabaseUnavailable(fields.fatalError)
    ) {
      logger.warn(
        { reason: message.split('\n')[0], error: (fields.fatalError as Error).message },
        'graphile worker: could not record finished jobs while the database was away; the pools restart to recover them',
      );
      return;
    }
    // A task that failed because PostgreSQL was away (a scheduled task runs
    // again at its next time, a job is retried): the task said so already.
    if (level === 'error' && isDatabaseUnavailable(fields.error)) {
      logger.warn(
        { job: fields.job, reason: (fields.error as Error).message },
        'graphile worker: a task failed while the database was away',
      );
      return;
    }
    // Any other error it retries by itself (a fetch or a lock reset while
    // PostgreSQL is away) is a warning as well, in one line.
    if (level === 'error' && /\btry(ing)? again\b/.test(message)) {
      logger.warn({ reason: message.split('\n')[0] }, 'graphile worker: a database call failed; it tries again');
      return;
    }
    // One line per finished job is the task's own ('job succeeded'); Graphile's
    // is a repeat, and so is its start line ('worker started' names the tasks).
    if (message.startsWith('Completed task') || message.startsWith('Worker connected')) {
      logger.debug(fields, message);
      return;
    }
    const method = level === 'warning' ? 'warn' : level === 'error' ? 'error' : level === 'debug' ? 'debug' : 'info';
    logger[method](fields, message);
  });
}
