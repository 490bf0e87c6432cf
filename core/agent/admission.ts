// The Agent API's admission limit, shared by every api replica without a
// database write per request. Windows are fixed (floor(now / window)), so
// replicas agree on them. A replica admits from a local block of tokens and,
// when the block is empty, leases the next one with a single upsert on
// agent_admission_windows that grants at most what is left of the window: the
// total admitted across replicas never exceeds the limit.
//
// The price: tokens a replica leased but did not use are lost at the window's
// end. A replica holds at most `lease` of them (a lease never asks for more
// than half of what is left, rounded up), so with N replicas a client may be
// refused up to (N - 1) * lease requests early, never admitted beyond the limit.
//
// If PostgreSQL cannot be reached, each replica counts the limit in its own
// memory (fail open to the local limit) and tries the database again every
// few seconds; the routes answer 503 during an outage anyway.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';

export type AdmissionOptions = { limit: number; windowMs: number; lease: number };
type Log = { warn: (details: object, message: string) => void; info: (details: object, message: string) => void };

/** Keys kept in memory at most; the oldest is forgotten first (its leased tokens with it). */
export const MAX_TRACKED = 100_000;
/** While the database is away, how long replicas count locally before trying it again. */
const OUTAGE_RETRY_MS = 2_000;

type Waiter = (admitted: boolean | Promise<boolean>) => void;

type Slot = {
  windowStart: number;
  /** Leased by this replica and not yet spent. */
  tokens: number;
  /** Admitted by this replica in this window (the local limit during an outage). */
  used: number;
  /** The shared window has nothing left to lease. */
  exhausted: boolean;
  leasing: boolean;
  /** Requests waiting for the lease in flight: they share it. */
  waiters: Waiter[];
};

const Grant = z.object({ granted: z.number(), last_grant: z.number() });

export class SharedAdmission {
  private readonly slots = new Map<string, Slot>();
  private retryDatabaseAt = 0;
  private outage = false;

  constructor(
    private readonly db: CommonQueryMethods,
    private readonly options: AdmissionOptions,
    private readonly log: Log,
  ) {}

  /** Seconds from `now` to the end of its window. */
  retryAfterSeconds(now = Date.now()): number {
    const { windowMs } = this.options;
    return Math.ceil((now - (now % windowMs) + windowMs - now) / 1000);
  }

  /**
   * Whether one more request of `key` is admitted. A boolean at once when the
   * local block (or the known-empty window) decides; a promise only while the
   * replica leases its next block.
   */
  admit(key: string, now = Date.now()): boolean | Promise<boolean> {
    const windowStart = now - (now % this.options.windowMs);
    let slot = this.slots.get(key);
    if (!slot || slot.windowStart !== windowStart) {
      slot = { windowStart, tokens: 0, used: 0, exhausted: false, leasing: false, waiters: [] };
      // Re-inserted at the end, so eviction takes the least recently opened key.
      if (!this.slots.delete(key) && this.slots.size >= MAX_TRACKED) this.slots.delete(this.slots.keys().next().value!);
      this.slots.set(key, slot);
    }
    if (slot.tokens > 0) {
      slot.tokens--;
      slot.used++;
      return true;
    }
    if (slot.exhausted) return false;
    if (now < this.retryDatabaseAt) return this.local(slot);
    const s = slot;
    return new Promise<boolean>((resolve) => {
      s.waiters.push(resolve);
      if (!s.leasing) void this.lease(key, s);
    });
  }

  private local(slot: Slot): boolean {
    if (slot.used >= this.options.limit) return false;
    slot.used++;
    return true;
  }

  private async lease(key: string, slot: Slot): Promise<void> {
    const { limit } = this.options;
    slot.leasing = true;
    // Enough for everyone already waiting, so none of them needs a second lease.
    const want = Math.max(this.options.lease, slot.waiters.length);
    let failed = false;
    try {
      // Never more than half of what is left (rounded up): a replica that
      // leases near the end leaves the others something to lease.
      const grant = sql.fragment`least(${want}::int, ceil((${limit}::int - w.granted) / 2.0)::int)`;
      const first = Math.min(want, Math.ceil(limit / 2));
      const row = await this.db.maybeOne(sql.type(Grant)`
        insert into agent_admission_windows as w (key, window_start, granted, last_grant)
        values (${key}, ${new Date(slot.windowStart).toISOString()}::timestamptz, ${first}::int, ${first}::int)
        on conflict (key, window_start) do update
          set granted = w.granted + ${grant}, last_grant = ${grant}, leases = w.leases + 1
          where w.granted < ${limit}::int
        returning granted, last_grant`);
      if (this.outage) {
        this.outage = false;
        this.log.info({}, 'agent admission: PostgreSQL is back, the limit is shared across replicas again');
      }
      // No row: the window was already full (and nothing was written).
      if (row) slot.tokens += row.last_grant;
      if (!row || row.granted >= limit) slot.exhausted = true;
    } catch (error) {
      failed = true;
      this.retryDatabaseAt = Date.now() + OUTAGE_RETRY_MS;
      if (!this.outage) {
        this.outage = true;
        // Once per outage: a flood of requests must not become a flood of log lines.
        this.log.warn(
          { err: error, unavailable: isDatabaseUnavailable(error) },
          'agent admission: cannot lease from PostgreSQL, counting the limit per replica until it answers',
        );
      }
    } finally {
      slot.leasing = false;
    }
    this.settle(key, slot, failed);
  }

  /** Hands the lease's tokens to the waiting requests, in arrival order. */
  private settle(key: string, slot: Slot, failed: boolean): void {
    let served = 0;
    while (served < slot.waiters.length && slot.tokens > 0) {
      slot.tokens--;
      slot.used++;
      slot.waiters[served++]!(true);
    }
    const rest = slot.waiters.splice(0).slice(served);
    if (rest.length === 0) return;
    if (!failed && !slot.exhausted) {
      slot.waiters.push(...rest);
      void this.lease(key, slot);
      return;
    }
    // A lease that ended after its window closed: those requests belong to the next window.
    const ended = Date.now() >= slot.windowStart + this.options.windowMs;
    for (const waiter of rest) waiter(ended ? this.admit(key) : failed ? this.local(slot) : false);
  }
}
