// The faults a soak injects, spread evenly over the middle of the run (from
// 15% to 75% of it) so the load before and after is steady: a worker and an
// api killed, a worker frozen past its heartbeat, PostgreSQL restarted both
// ways (when the soak runs its own), and the LISTEN connections dropped.
import { WORKER_TIMING, type SoakPlatform } from './platform.ts';

export type Fault = {
  atMs: number;
  label: string;
  kind: 'kill-worker' | 'kill-api' | 'stop-worker' | 'pg-fast' | 'pg-immediate' | 'drop-listen';
};
export type FaultResult = { detail: string; outage?: { from: number; to: number } };

/** Longer than WORKER_STALE_AFTER_MS, so the other worker takes the frozen one's jobs. */
const FROZEN_MS = Number(WORKER_TIMING.WORKER_STALE_AFTER_MS) + 3_000;
const PG_DOWN_MS = 2_000;

export function faultSchedule(durationMs: number, ownsDatabase: boolean): Fault[] {
  const kinds: Array<Omit<Fault, 'atMs'>> = [
    { kind: 'kill-worker', label: 'SIGKILL worker 1 (restarted at once)' },
    { kind: 'kill-api', label: 'SIGKILL api 2 (restarted at once)' },
    { kind: 'stop-worker', label: `SIGSTOP worker 2 for ${FROZEN_MS / 1000} s (past its heartbeat), then SIGCONT` },
    ...(ownsDatabase
      ? [
          { kind: 'pg-fast', label: `PostgreSQL fast shutdown, ${PG_DOWN_MS / 1000} s down, started again` } as const,
          {
            kind: 'pg-immediate',
            label: `PostgreSQL immediate shutdown (crash recovery), ${PG_DOWN_MS / 1000} s down, started again`,
          } as const,
        ]
      : []),
    { kind: 'drop-listen', label: 'every LISTEN connection terminated by the server' },
  ];
  const from = durationMs * 0.15;
  const span = durationMs * 0.6;
  return kinds.map((k, i) => ({ ...k, atMs: Math.round(from + (span * i) / Math.max(1, kinds.length - 1)) }));
}

export async function runFault(platform: SoakPlatform, fault: Fault): Promise<FaultResult> {
  switch (fault.kind) {
    case 'kill-worker':
      await platform.kill(platform.workers[0]!);
      return { detail: 'worker 1 is back' };
    case 'kill-api':
      await platform.kill(platform.apis[1]!);
      return { detail: 'api 2 is back' };
    case 'stop-worker':
      await platform.pause(platform.workers[1]!, FROZEN_MS);
      return { detail: 'worker 2 resumed' };
    case 'pg-fast':
    case 'pg-immediate': {
      const from = Date.now();
      await platform.restartPostgres(fault.kind === 'pg-fast' ? 'fast' : 'immediate', PG_DOWN_MS);
      return {
        detail: `PostgreSQL back after ${((Date.now() - from) / 1000).toFixed(1)} s`,
        outage: { from, to: Date.now() },
      };
    }
    case 'drop-listen':
      return { detail: `${await platform.dropListenConnections()} LISTEN connections ended` };
  }
}
