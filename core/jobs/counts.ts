// Each account's unfinished jobs are counted by appending changes (no row a
// request of the account must wait for); every api and worker process folds
// them into the counts now and then (account_job_counts_fold, migration
// 0043), so a count is a short sum however busy the account is.
import type { Logger } from 'pino';
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

/**
 * How often each api and worker process folds: every enqueue sums the
 * changes not folded yet, so a busy account's sums stay a few hundred rows.
 */
export const COUNT_FOLD_MS = 250;

/** Folds the changes so far; how many change rows it folded. */
export async function foldAccountCounts(db: CommonQueryMethods): Promise<number> {
  return db.oneFirst(sql.type(z.object({ n: z.number() }))`select account_job_counts_fold() as n`);
}

/** Folds every `everyMs` until stopped; a failed fold (the database away) waits for the next. */
export function keepFoldingAccountCounts(db: CommonQueryMethods, logger: Logger, everyMs: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    foldAccountCounts(db)
      .catch((error: unknown) =>
        logger.debug({ err: error }, "could not fold the accounts' job counts; the next round will"),
      )
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
