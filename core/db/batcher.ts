// Many small writes of the same kind, sent as one: callers submit an item and
// get its own answer, while the batcher hands whatever arrived to one `run`
// (one statement or one transaction: one round trip, one commit). The first
// item goes at once; items that arrive while runs are in flight wait for one
// to return and go together in the next, so a lone item waits for nothing.
// Used by the api's group commit (core/jobs/group-commit.ts) and the worker's
// job starts and results (core/jobs/completions.ts).
//
// If a run throws, each of its items is run again on its own, so only the
// guilty one fails. Items with the same key never share a run (a later one
// waits for the next), so `run` may assume keys are distinct.
import type { Logger } from 'pino';

/** One item's answer from a run: its value, or the error that fails it alone. */
export type ItemOutcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

type Pending<I, O> = { item: I; resolve: (out: O) => void; reject: (error: unknown) => void };

export type BatcherOptions<I> = {
  maxInFlight?: number;
  maxBatch?: number;
  /** Items with the same key go in different runs. */
  key?: (item: I) => string;
  /** What a run writes, for the log line when one fails. */
  what: string;
  logger?: Logger | undefined;
};

export class StatementBatcher<I, O> {
  private queue: Array<Pending<I, O>> = [];
  private inFlight = 0;

  constructor(
    /** One outcome per item, in order. */
    private readonly run: (items: readonly I[]) => Promise<Array<ItemOutcome<O>>>,
    private readonly options: BatcherOptions<I>,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    const maxInFlight = this.options.maxInFlight ?? 2;
    const maxBatch = this.options.maxBatch ?? 500;
    const key = this.options.key;
    while (this.inFlight < maxInFlight && this.queue.length > 0) {
      let batch: Array<Pending<I, O>>;
      if (!key) {
        batch = this.queue.splice(0, maxBatch);
      } else {
        batch = [];
        const later: Array<Pending<I, O>> = [];
        const keys = new Set<string>();
        for (const pending of this.queue) {
          const k = key(pending.item);
          if (batch.length < maxBatch && !keys.has(k)) {
            keys.add(k);
            batch.push(pending);
          } else later.push(pending);
        }
        this.queue = later;
      }
      this.inFlight++;
      void this.flushAndPump(batch);
    }
  }

  private async flushAndPump(batch: Array<Pending<I, O>>): Promise<void> {
    let done = false;
    // The next run starts before this one's callers hear back: the database
    // works on it while they write their answers, not after.
    const next = () => {
      if (done) return false;
      done = true;
      this.inFlight--;
      const before = this.inFlight;
      this.pump();
      // Whether the database now waits for the started run alone.
      return this.inFlight > before && this.inFlight === 1;
    };
    try {
      await this.flush(batch, next);
    } finally {
      next();
    }
  }

  private async flush(batch: Array<Pending<I, O>>, ran: () => boolean = () => false): Promise<void> {
    let outcomes: Array<ItemOutcome<O>>;
    try {
      outcomes = await this.run(batch.map((p) => p.item));
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      this.options.logger?.warn(
        { err: error, size: batch.length },
        `batched ${this.options.what} failed; running each on its own`,
      );
      await Promise.all(batch.map((pending) => this.flush([pending])));
      return;
    }
    // The next run began and nothing else is in flight: the database waits
    // for its statement, which gets there through a chain of promise steps,
    // each of which would queue behind these callers' answers. So they wait
    // one turn of the event loop, until it is sent. (With another run in
    // flight the database is busy, and answering first measured faster.)
    if (ran()) await new Promise((resolve) => setImmediate(resolve));
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
  }
}
