// link/wait waiters of one api process. They hold no database connection:
// the process's one LISTEN connection (JobEventHub) carries the
// channel_link_events NOTIFY of every state change, and one notification
// wakes every waiter of that tenant's channel at once. After the LISTEN
// connection comes back, waiters are woken to re-read (a change may have
// happened while it was away).
import type { JobEventHub } from '../jobs/events.ts';
import type { ChannelState } from './types.ts';

/**
 * A change, with how many waiters it woke at once and whether the waiter's
 * own callback already answered it; or why the wait ended without one.
 */
export type WakeUp =
  | { state: ChannelState; crowd: number; answered: boolean }
  | { state: null; reason: 'timeout' | 'closed' | 'resync' };
type Change = { state: ChannelState; crowd: number };
type Waiter = (wake: Change | Extract<WakeUp, { state: null }>) => void;
/** Called in the wake-up loop itself, before any waiter's promise settles; true when it answered the waiter. */
export type OnChange = (change: Change) => boolean;

export class LinkWaiters {
  private waiters = new Map<string, Set<Waiter>>();
  /** How waits ended since start: woken by a change, timed out, client gone, re-read after LISTEN came back. */
  readonly ended = { woken: 0, timeout: 0, closed: 0, resync: 0 };
  private started: Promise<void> | null = null;

  constructor(private readonly hub: JobEventHub) {}

  start(): Promise<void> {
    this.started ??= (async () => {
      this.hub.onConnectionChange((connected) => {
        if (connected) this.wakeAll({ state: null, reason: 'resync' });
      });
      await this.hub.listen('channel_link_events', (payload) => this.onNotification(payload));
    })();
    return this.started;
  }

  size(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /**
   * Resolves at the next state change of the channel, at the timeout, or on
   * `cancel()` (the client went away); the waiter is removed in every case.
   * A plain callback rather than an AbortSignal: a thousand waiters woken at
   * once each cost a little, and event targets cost more than a function.
   */
  wait(
    tenantId: string,
    channel: string,
    timeoutMs: number,
    onChange?: OnChange,
  ): { woken: Promise<WakeUp>; cancel: () => void } {
    const key = `${tenantId}:${channel}`;
    let cancel: () => void = () => undefined;
    const woken = new Promise<WakeUp>((resolve) => {
      let set = this.waiters.get(key);
      if (!set) {
        set = new Set();
        this.waiters.set(key, set);
      }
      let ended = false;
      const done: Waiter = (wake) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key);
        this.ended[wake.state ? 'woken' : wake.reason] += 1;
        resolve(wake.state ? { ...wake, answered: answeredBy(onChange, wake) } : wake);
      };
      const timer = setTimeout(() => done({ state: null, reason: 'timeout' }), timeoutMs);
      set.add(done);
      cancel = () => done({ state: null, reason: 'closed' });
    });
    return { woken, cancel };
  }

  private onNotification(payload: string): void {
    let event: { tenantId?: string; channel?: string; state?: ChannelState };
    try {
      event = JSON.parse(payload) as typeof event;
    } catch {
      return;
    }
    const set = this.waiters.get(`${event.tenantId}:${event.channel}`);
    if (!set || !event.state) return;
    const wake = { state: event.state, crowd: set.size };
    for (const waiter of [...set]) waiter(wake);
  }

  private wakeAll(wake: WakeUp): void {
    for (const set of [...this.waiters.values()]) for (const waiter of [...set]) waiter(wake);
  }
}

/** The waiter's own answer in the wake-up loop; one that throws leaves the waiter to the normal path (and the loop to the others). */
function answeredBy(onChange: OnChange | undefined, change: Change): boolean {
  try {
    return onChange?.(change) ?? false;
  } catch {
    return false;
  }
}
