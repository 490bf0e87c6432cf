// What one account may hold (plan_limits, migration 0037): its workspaces,
// and its unfinished jobs (queued, running or being cancelled). The job
// limit is checked where work that a person or an agent asked for is
// enqueued (JobSpec.quota); a refusal writes nothing and names the limit.
import { errorChain, sqlState } from '../db/errors.ts';

/** The account would go over its plan's limit of unfinished jobs (SQLSTATE QJ001). */
export class QueueLimitError extends Error {
  override name = 'QueueLimitError';
  readonly code = 'QUEUE_LIMIT_REACHED';
  constructor(
    readonly plan: string,
    readonly limit: number,
    readonly open: number,
  ) {
    super(
      `The account has ${open} unfinished jobs and its ${plan} plan allows ${limit} at a time; wait for some to finish, or upgrade.`,
    );
  }
}

export const QUEUE_LIMIT_SQLSTATE = 'QJ001';

/** The refusal a database error stands for, or null when it is something else. */
export function asQueueLimitError(error: unknown): QueueLimitError | null {
  if (sqlState(error) !== QUEUE_LIMIT_SQLSTATE) return null;
  for (const e of errorChain(error)) {
    const { detail } = e as { detail?: unknown };
    if (typeof detail !== 'string') continue;
    try {
      const d = JSON.parse(detail) as { plan?: string; limit?: number; open?: number };
      return new QueueLimitError(d.plan ?? 'free', d.limit ?? 0, d.open ?? 0);
    } catch {
      break;
    }
  }
  return new QueueLimitError('free', 0, 0);
}
