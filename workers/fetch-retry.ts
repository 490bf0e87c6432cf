// A fetch that comes back empty right after a new-job announcement tries
// again a moment later. Graphile Worker's fetch locks every idle named-queue
// row while it looks (its "strategy 2"), and every pool of every worker
// process fetches on the same announcement: a pool whose fetch meets another
// pool's locks skips those queues and finds nothing, then would wait for its
// next poll (WORKER_POLL_INTERVAL_MS) although a chat turn waits in one of
// them. Measured in the bench: one chat turn in a few hundred waited 2-6 s.
import type { WorkerEvents } from 'graphile-worker';

/** Tries again this often (a few ms apart, spread so pools do not meet again). */
const RETRIES = 3;
const RETRY_MS = [5, 15, 40];
/** An empty fetch this soon after an announcement is suspect. */
const AFTER_PULSE_MS = 250;

type Pulsable = { pulse: (count: number) => void; mode: string };

export function retryEmptyFetches(events: WorkerEvents): void {
  const state = new WeakMap<Pulsable, { lastPulse: number; retries: number; own: boolean }>();
  events.on('localQueue:init', ({ localQueue }) => {
    const queue = localQueue as unknown as Pulsable;
    const s = { lastPulse: 0, retries: 0, own: false };
    state.set(queue, s);
    const pulse = queue.pulse.bind(queue);
    queue.pulse = (count: number) => {
      if (!s.own) {
        s.lastPulse = performance.now();
        s.retries = 0;
      }
      pulse(count);
    };
  });
  events.on('localQueue:getJobs:complete', ({ localQueue, jobs }) => {
    const queue = localQueue as unknown as Pulsable;
    const s = state.get(queue);
    if (!s) return;
    if (jobs.length > 0) {
      s.retries = 0;
      return;
    }
    if (s.retries >= RETRIES || performance.now() - s.lastPulse > AFTER_PULSE_MS) return;
    const delay = RETRY_MS[s.retries]! * (0.5 + Math.random());
    s.retries++;
    setTimeout(() => {
      if (queue.mode === 'RELEASED') return; // the pool is stopping
      s.own = true;
      try {
        queue.pulse(1);
      } finally {
        s.own = false;
      }
    }, delay).unref();
  });
}
