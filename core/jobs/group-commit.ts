// Group commit for enqueues. Every transaction that calls add_jobs() NOTIFYs,
// and PostgreSQL serialises commits of notifying transactions behind one
// database-wide lock. So instead of one transaction per request, requests
// that arrive while a commit is in flight are gathered and written together:
// each request's own rows in a savepoint (a failing request rolls back alone),
// all jobs rows plus one add_jobs() call, one COMMIT. Nobody is told "accepted"
// before that COMMIT returns. At low load a batch is a single request, so this
// adds no waiting.
import type { Logger } from 'pino';
import { StatementBatcher, type ItemOutcome } from '../db/batcher.ts';
import type { DatabasePool, DatabaseTransactionConnection } from '../db/pool.ts';
import { enqueueJobs, type EnqueuedJob, type JobSpec } from './enqueue.ts';

export type Submission<T> = {
  /** The request's own writes, run in a savepoint of the shared transaction. */
  work?: (tx: DatabaseTransactionConnection) => Promise<T>;
  /**
   * False when `work` is a single statement (atomic by itself): it then runs
   * without a savepoint, saving two round trips; if it fails, the batch is
   * retried request by request so only the failing one fails.
   */
  savepoint?: boolean;
  /** Jobs to enqueue; a function may derive them from what `work` returned. */
  jobs: readonly JobSpec[] | ((value: T) => readonly JobSpec[]);
};

export type Submitted<T> = { value: T; jobs: EnqueuedJob[] };

/**
 * Set-based work: one call handles every queued input of its kind with a few
 * statements, instead of a statement (and savepoint) per request. It returns
 * one result per input, in order. If it throws, the batch is retried request
 * by request, so only a failing input fails.
 */
export type BatchHandler<I, T> = ((
  tx: DatabaseTransactionConnection,
  inputs: readonly I[],
  inTransaction: boolean,
) => Promise<Array<{ value: T; jobs: readonly JobSpec[] }>>) & {
  /**
   * Set by a handler whose every statement is atomic on its own and which
   * writes its jobs itself (it returns none). Its inputs then go in a lane of
   * their own, one batch at a time, run on the pool without a transaction
   * block: no BEGIN and COMMIT round trips, and any row a statement locks is
   * held only while it runs. One at a time because two such batches of one
   * tenant wait on the same rows anyway (the chat send's message counter);
   * measured on 2 cores, a second batch in flight costs about 40 % more
   * database CPU per send for no more sends per second.
   */
  needsNoTransaction?: boolean;
};

type Pending = {
  submission: Submission<unknown>;
  batched?: { handler: BatchHandler<unknown, unknown>; input: unknown };
};

export type GroupCommitOptions = { maxBatch?: number; maxInFlight?: number; logger?: Logger };

const DEFAULT_MAX_BATCH = 200;

export class GroupCommitter {
  // Gathering, runs in flight and the one-by-one retry of a failed batch are
  // the shared batcher's; this class writes a batch. Handlers that need no
  // transaction have lanes (batchers) of their own.
  private readonly batcher: StatementBatcher<Pending, Submitted<unknown>>;
  private readonly lanes = new Map<BatchHandler<unknown, unknown>, StatementBatcher<unknown, Submitted<unknown>>>();

  constructor(
    private readonly pool: DatabasePool,
    private readonly options: GroupCommitOptions = {},
  ) {
    this.batcher = new StatementBatcher((batch) => this.write(batch), {
      maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
      maxInFlight: options.maxInFlight ?? 2,
      what: 'group commit',
      logger: options.logger,
    });
  }

  /** The lane of a handler that needs no transaction (see BatchHandler). */
  private lane(handler: BatchHandler<unknown, unknown>): StatementBatcher<unknown, Submitted<unknown>> {
    let lane = this.lanes.get(handler);
    if (!lane) {
      // The pool stands in for a transaction: such a handler only uses what both have.
      const run = async (inputs: readonly unknown[]): Promise<Array<ItemOutcome<Submitted<unknown>>>> => {
        const results = await handler(this.pool as unknown as DatabaseTransactionConnection, inputs, false);
        if (results.some((r) => r.jobs.length > 0))
          throw new Error('a handler that needs no transaction must write its jobs itself');
        return results.map((r) => ({ ok: true, value: { value: r.value, jobs: [] } }));
      };
      lane = new StatementBatcher(run, {
        maxBatch: this.options.maxBatch ?? DEFAULT_MAX_BATCH,
        maxInFlight: 1,
        what: 'group commit',
        logger: this.options.logger,
      });
      this.lanes.set(handler, lane);
    }
    return lane;
  }

  submit<T = undefined>(submission: Submission<T>): Promise<Submitted<T>> {
    return this.batcher.submit({ submission: submission as Submission<unknown> }) as Promise<Submitted<T>>;
  }

  submitBatched<I, T>(handler: BatchHandler<I, T>, input: I): Promise<Submitted<T>> {
    const own = handler as BatchHandler<unknown, unknown>;
    if (own.needsNoTransaction) return this.lane(own).submit(input) as Promise<Submitted<T>>;
    return this.batcher.submit({
      submission: { jobs: [] },
      batched: { handler: handler as BatchHandler<unknown, unknown>, input },
    }) as Promise<Submitted<T>>;
  }

  /** Convenience for requests that only enqueue. */
  async enqueue(specs: readonly JobSpec[]): Promise<EnqueuedJob[]> {
    return (await this.submit({ jobs: specs })).jobs;
  }

  /** One outcome per request; throws when the batch as a whole failed (the batcher then writes each alone). */
  private async write(batch: readonly Pending[]): Promise<Array<ItemOutcome<Submitted<unknown>>>> {
    if (batch.every((item) => !item.submission.work && !item.batched)) return this.writeEnqueueOnly(batch);
    const outcomes = new Map<Pending, Submitted<unknown>>();
    const failed = new Map<Pending, unknown>();
    await this.pool.transaction(async (tx) => {
      outcomes.clear();
      failed.clear();
      const specs: JobSpec[] = [];
      const owners: Array<{ item: Pending; from: number; count: number }> = [];
      // Set-based work first, one call per handler for all its inputs.
      const groups = new Map<BatchHandler<unknown, unknown>, Pending[]>();
      for (const item of batch) {
        if (item.batched) groups.set(item.batched.handler, [...(groups.get(item.batched.handler) ?? []), item]);
      }
      for (const [handler, items] of groups) {
        const results = await handler(
          tx,
          items.map((i) => i.batched!.input),
          true,
        );
        items.forEach((item, i) => {
          const result = results[i]!;
          owners.push({ item, from: specs.length, count: result.jobs.length });
          specs.push(...result.jobs);
          outcomes.set(item, { value: result.value, jobs: [] });
        });
      }
      for (const item of batch) {
        if (item.batched) continue;
        try {
          const { work, jobs, savepoint = true } = item.submission;
          // A single-request batch needs no savepoint: its failure is the batch's.
          const value = work
            ? batch.length === 1 || !savepoint
              ? await work(tx)
              : await tx.transaction((sp) => work(sp))
            : undefined;
          const itemSpecs = typeof jobs === 'function' ? jobs(value) : jobs;
          owners.push({ item, from: specs.length, count: itemSpecs.length });
          specs.push(...itemSpecs);
          outcomes.set(item, { value, jobs: [] });
        } catch (error) {
          // Without a savepoint the transaction is spoilt: let the batch fail
          // and be written again one by one.
          if (batch.length === 1 || item.submission.savepoint === false) throw error;
          failed.set(item, error);
        }
      }
      const enqueued = await enqueueJobs(tx, specs);
      for (const { item, from, count } of owners) outcomes.get(item)!.jobs = enqueued.slice(from, from + count);
    });
    return batch.map((item) => {
      const outcome = outcomes.get(item);
      return outcome ? { ok: true, value: outcome } : { ok: false, error: failed.get(item) };
    });
  }

  /**
   * Requests that only enqueue need no transaction block: enqueueJobs is one
   * statement, atomic on its own, so this saves the BEGIN and COMMIT round trips.
   */
  private async writeEnqueueOnly(batch: readonly Pending[]): Promise<Array<ItemOutcome<Submitted<unknown>>>> {
    const lists = batch.map(({ submission: { jobs } }) => (typeof jobs === 'function' ? jobs(undefined) : jobs));
    const enqueued = await enqueueJobs(this.pool, lists.flat());
    let from = 0;
    return lists.map((list) => {
      const jobs = enqueued.slice(from, from + list.length);
      from += list.length;
      return { ok: true, value: { value: undefined, jobs } };
    });
  }
}
