// Many small statements of the same kind, written as one: callers submit an
// item and get its own answer, while the batcher sends whatever arrived as
// one statement (one round trip, one commit). The first item goes at once;
// items that arrive while statements are in flight wait for one to return
// and go together in the next, so a lone item waits for nothing.
//
// If a batch's statement fails, each of its items is sent again on its own,
// so only the guilty one fails. Items with the same key never share a batch
// (a later one waits for the next), so `run` may assume keys are distinct.
import type { Logger } from 'pino';

type Pending<I, O> = { item: I; resolve: (out: O) => void; reject: (error: unknown) => void };

export type BatcherOptions = { maxInFlight?: number; maxBatch?: number; what: string; logger: Logger };

export class StatementBatcher<I, O> {
  private queue: Array<Pending<I, O>> = [];
  private inFlight = 0;

  constructor(
    /** One answer per item, in order. */
    private readonly run: (items: readonly I[]) => Promise<O[]>,
    private readonly key: (item: I) => string,
    private readonly options: BatcherOptions,
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
    while (this.inFlight < maxInFlight && this.queue.length > 0) {
      const batch: Array<Pending<I, O>> = [];
      const later: Array<Pending<I, O>> = [];
      const keys = new Set<string>();
      for (const pending of this.queue) {
        const key = this.key(pending.item);
        if (batch.length < maxBatch && !keys.has(key)) {
          keys.add(key);
          batch.push(pending);
        } else later.push(pending);
      }
      this.queue = later;
      this.inFlight++;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async flush(batch: Array<Pending<I, O>>): Promise<void> {
    try {
      const answers = await this.run(batch.map((p) => p.item));
      batch.forEach((pending, i) => pending.resolve(answers[i]!));
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      this.options.logger.warn({ err: error, size: batch.length }, `batched ${this.options.what} failed; sending each on its own`);
      await Promise.all(batch.map((pending) => this.flush([pending])));
    }
  }
}
