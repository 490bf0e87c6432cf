// Bulk actions of the console: retry the failed jobs a filter matches, or
// cancel the queued and running ones. The operator sees what will happen
// first (how many, which, what each becomes); the action then takes the
// jobs that match at that moment, at most BULK_LIMIT, and runs the single
// action on each (actions.ts), with its audit row, all in one transaction:
// every job of the batch changes, or none does.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { cancelJobIn, retryJobIn, RETRY_ATTEMPTS } from './actions.ts';
import type { Operator } from './audit.ts';
import { jobFilterWhere, listJobs, type JobFilter, type JobListRow, type JobStateFilter } from './jobs.ts';

export const BULK_LIMIT = 1000;
/** Counting stops here: "more than 100,000" says enough. */
const COUNT_CAP = 100_000;

export const BULK_ACTIONS = ['retry', 'cancel'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export type BulkFilter = Omit<JobFilter, 'state' | 'before'> & { state: JobStateFilter };

/** The states an action takes from those the filter names: retry takes failed jobs, cancel queued and running ones. */
export function actionStates(action: BulkAction, state: JobStateFilter): JobStateFilter[] {
  const takes: JobStateFilter[] = action === 'retry' ? ['failed'] : ['queued', 'running'];
  if (state === 'any') return takes;
  if (state === 'open') return takes.filter((s) => s !== 'failed');
  return takes.includes(state) ? [state] : [];
}

const EFFECT: Record<BulkAction, string> = {
  retry: `Each is queued again as its next attempt, with up to ${RETRY_ATTEMPTS} more attempts, after the jobs already in its queue.`,
  cancel:
    "A queued job is cancelled before it runs; a running one's worker is asked to stop it (it ends as cancelled).",
};
export const bulkEffect = (action: BulkAction) => EFFECT[action];

function targetsWhere(action: BulkAction, filter: BulkFilter) {
  const states = actionStates(action, filter.state);
  return sql.fragment`${jobFilterWhere({ ...filter, state: 'any' })} and j.status = any(${sql.array(states.length ? states : ['none'], 'text')})`;
}

/** How many jobs the action would take now, counted up to COUNT_CAP + 1. */
const countTargets = (db: CommonQueryMethods, action: BulkAction, filter: BulkFilter) =>
  db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from (select 1 from jobs j where ${targetsWhere(action, filter)} limit ${COUNT_CAP + 1}) x`);

export type BulkPreview = { count: number; capped: boolean; over: boolean; sample: readonly JobListRow[] };

/** What the action would take now: how many (up to COUNT_CAP), and the newest few. */
export async function previewBulk(
  db: DatabasePool,
  action: BulkAction,
  filter: BulkFilter,
  sampleSize = 20,
): Promise<BulkPreview> {
  const states = actionStates(action, filter.state);
  if (states.length === 0) return { count: 0, capped: false, over: false, sample: [] };
  const count = await countTargets(db, action, filter);
  const sample =
    states.length === 1
      ? (await listJobs(db, { ...filter, state: states[0]! }, sampleSize)).rows
      : (await listJobs(db, { ...filter, state: 'open' }, sampleSize)).rows.filter((r) => states.includes(r.status));
  return { count: Math.min(count, COUNT_CAP), capped: count > COUNT_CAP, over: count > BULK_LIMIT, sample };
}

export type BulkOutcome =
  | { ok: true; done: number; skipped: number; outcome: string }
  | { ok: false; status: 409; message: string };

export const overLimitMessage = (count: number, capped: boolean) =>
  `This filter matches ${capped ? `more than ${COUNT_CAP.toLocaleString('en')}` : count.toLocaleString('en')} jobs, more than the ${BULK_LIMIT.toLocaleString('en')} one action may change: narrow it (a kind, a tenant, a time range).`;

export async function runBulk(
  db: DatabasePool,
  operator: Operator,
  action: BulkAction,
  filter: BulkFilter,
  reason: string,
): Promise<BulkOutcome> {
  return db.transaction(async (tx) => {
    const ids = await tx.anyFirst(sql.type(z.object({ id: z.string() }))`
      select j.id from jobs j where ${targetsWhere(action, filter)} order by j.created_at, j.id limit ${BULK_LIMIT + 1} for update of j`);
    if (ids.length > BULK_LIMIT) {
      const count = await countTargets(tx, action, filter);
      return { ok: false, status: 409, message: overLimitMessage(Math.min(count, COUNT_CAP), count > COUNT_CAP) };
    }
    const each = `${reason} (bulk ${action} of ${ids.length} job${ids.length === 1 ? '' : 's'})`;
    let done = 0;
    for (const id of ids) {
      const outcome =
        action === 'retry' ? await retryJobIn(tx, operator, id, each) : await cancelJobIn(tx, operator, id, each);
      if (outcome.ok) done++;
    }
    const skipped = ids.length - done;
    const verb = action === 'retry' ? 'queued again' : 'cancelled or asked to stop';
    return {
      ok: true,
      done,
      skipped,
      outcome: `${done} job${done === 1 ? '' : 's'} ${verb}${skipped ? `; ${skipped} could not be (see each job's page)` : ''}`,
    };
  });
}
