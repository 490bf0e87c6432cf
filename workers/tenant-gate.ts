// Per-tenant fairness inside one worker process: at most `cap` jobs of one
// tenant run at once, so one tenant's backlog can never hold every slot while
// other tenants wait. Every job carries the Graphile flag `t:<tenantId>`
// (core/jobs/enqueue.ts); before each fetch Graphile asks for the flags to
// skip, and we name the tenants that are at their cap.
//
// Fetches run concurrently, and any of them may return a job of any tenant
// not named. To keep the cap exact, a tenant is skipped when its running jobs
// plus the fetches already under way could reach the cap, and at most `cap`
// fetches are under way at once (a tenant not running yet could otherwise be
// handed to every idle worker at the same instant).
//
// Graphile reports the end of each fetch synchronously through its events:
// `job:start` (got one), `worker:getJob:empty` or `worker:getJob:error`.

import { tenantFlag } from '../core/jobs/enqueue.ts';

export class TenantGate {
  private readonly running = new Map<string, number>();
  private fetching = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly cap: number) {}

  /** The forbiddenFlags option of Graphile Worker. */
  readonly forbiddenFlags = (): string[] | Promise<string[]> => {
    if (this.fetching < this.cap) {
      this.fetching++;
      return this.skipList();
    }
    // All fetch slots are taken: wait for one to be handed over (below).
    return new Promise<string[]>((resolve) => this.waiting.push(() => resolve(this.skipList())));
  };

  /** Tenants this fetch must skip; the fetch itself is counted in `fetching`. */
  private skipList(): string[] {
    const others = this.fetching - 1;
    const skip: string[] = [];
    for (const [tenantId, count] of this.running) {
      if (count + others >= this.cap) skip.push(tenantFlag(tenantId));
    }
    return skip;
  }

  /** A fetch ended; `tenantId` is the tenant of the job it got, if any. */
  fetched(tenantId: string | null): void {
    if (tenantId) this.running.set(tenantId, (this.running.get(tenantId) ?? 0) + 1);
    const next = this.waiting.shift();
    // The slot passes straight to a waiting fetch, so nobody can slip in between.
    if (next) next();
    else this.fetching = Math.max(0, this.fetching - 1);
  }

  /** A job of the tenant finished (or was given back). */
  finished(tenantId: string | null): void {
    if (!tenantId) return;
    const count = (this.running.get(tenantId) ?? 0) - 1;
    if (count > 0) this.running.set(tenantId, count);
    else this.running.delete(tenantId);
  }

  /** Jobs running per tenant now (for logs and tests). */
  snapshot(): Record<string, number> {
    return Object.fromEntries(this.running);
  }
}

/** The tenant of a Graphile job, from our task envelope (maintenance jobs have none). */
export function tenantOfJob(job: { payload?: unknown }): string | null {
  const tenantId = (job.payload as { tenantId?: unknown } | null)?.tenantId;
  return typeof tenantId === 'string' ? tenantId : null;
}
