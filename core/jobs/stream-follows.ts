// The stream deltas an api process follows (for JobEventHub, events.ts): it
// decodes only the deltas of jobs someone here follows, keeps each followed
// stream's text so far (a late subscriber starts from the beginning), hands
// listeners only what continues that text, and when a piece is missed (a
// reconnect, or a subscriber that came mid-stream) asks the worker running
// the turn to send its text so far again (job_stream_replay, deltas.ts).
import type { Logger } from 'pino';
import { sql, type DatabasePool } from '../db/pool.ts';
import { decodeDeltasOf, REPLAY_CHANNEL, type Delta } from './deltas.ts';
import { StreamMemory } from './stream-memory.ts';

export type DeltaListener = (delta: Delta) => void;

/**
 * A stream that still has a gap this long after its replay was asked for is
 * asked for again. Not sooner: a replay late because the database is busy
 * must not bring another (measured: re-asking after 1 s made a storm of
 * replays at 1,000 streams, delta -> websocket p99 2.8 s against 0.7 s).
 */
const REPLAY_AGAIN_MS = 10_000;
/** Job ids per replay request (a NOTIFY payload stays under 8,000 bytes). */
const IDS_PER_REQUEST = 200;
/** How long deltas are still heard after the last stream followed here ends (sockets come and go). */
const LINGER_MS = 30_000;

export class StreamFollows {
  readonly listeners = new Map<string, Set<DeltaListener>>();
  private readonly streamed = new StreamMemory();
  /** When each stream with a gap was last asked to be sent again. */
  private readonly replayAsked = new Map<string, number>();
  private replayQueue: string[] = [];
  private listening = false;
  private lingering: NodeJS.Timeout | null = null;

  constructor(
    private readonly pool: DatabasePool,
    private readonly logger: Logger,
    private readonly hub: {
      /** Calls a job's listeners (one that throws does not stop the others). */
      callEach: (set: Set<DeltaListener> | undefined, delta: Delta, jobId: string) => void;
      /** Whether deltas should be heard at all: someone follows a stream (or did a moment ago). */
      following: (any: boolean) => void;
    },
  ) {}

  follow(jobId: string, listener: DeltaListener): () => void {
    let set = this.listeners.get(jobId);
    if (!set) {
      set = new Set();
      this.listeners.set(jobId, set);
    }
    set.add(listener);
    if (this.lingering) clearTimeout(this.lingering);
    this.lingering = null;
    if (!this.listening) {
      this.listening = true;
      this.hub.following(true);
    }
    return () => {
      set.delete(listener);
      if (set.size > 0 || this.listeners.get(jobId) !== set) return;
      this.listeners.delete(jobId);
      this.streamed.forget(jobId);
      this.replayAsked.delete(jobId);
      if (this.listeners.size === 0) this.linger();
    };
  }

  /** Whether deltas are heard now (someone follows a stream, or did a moment ago): a new connection listens then too. */
  get hearing(): boolean {
    return this.listening;
  }

  /** The text a followed job's current attempt has streamed so far, as far as this process has it in one piece. */
  soFar(jobId: string): Delta | null {
    return this.streamed.get(jobId);
  }

  /** The job is final: its stream is over. */
  ended(jobId: string): void {
    this.streamed.forget(jobId);
  }

  clear(): void {
    this.listeners.clear();
    if (this.lingering) clearTimeout(this.lingering);
  }

  private linger(): void {
    this.lingering ??= setTimeout(() => {
      this.lingering = null;
      if (this.listeners.size > 0 || !this.listening) return;
      this.listening = false;
      this.hub.following(false);
    }, LINGER_MS);
    this.lingering.unref();
  }

  private readonly follows = (jobId: string) => this.listeners.has(jobId);

  /** One job_deltas notification. */
  heard(payload: string): void {
    if (this.listeners.size === 0) return;
    for (const delta of decodeDeltasOf(payload, this.follows)) {
      const placed = this.streamed.take(delta);
      if (placed === 'gap') this.askReplay(delta.jobId);
      else if (placed !== 'known') {
        this.replayAsked.delete(delta.jobId);
        this.hub.callEach(this.listeners.get(delta.jobId), placed.delta, delta.jobId);
      }
    }
  }

  private askReplay(jobId: string): void {
    const now = Date.now();
    const asked = this.replayAsked.get(jobId);
    if (asked !== undefined && now - asked < REPLAY_AGAIN_MS) return;
    this.replayAsked.set(jobId, now);
    this.replayQueue.push(jobId);
    if (this.replayQueue.length === 1) queueMicrotask(() => this.sendReplayRequests());
  }

  /** The requests of one turn of the event loop, in one statement. */
  private sendReplayRequests(): void {
    const payloads: string[] = [];
    for (let i = 0; i < this.replayQueue.length; i += IDS_PER_REQUEST)
      payloads.push(this.replayQueue.slice(i, i + IDS_PER_REQUEST).join(','));
    this.replayQueue = [];
    this.pool
      .query(sql.unsafe`select pg_notify(${REPLAY_CHANNEL}, p) from unnest(${sql.array(payloads, 'text')}) p`)
      .catch((error) => this.logger.debug({ err: error }, 'job events: could not ask for streams again'));
  }
}
