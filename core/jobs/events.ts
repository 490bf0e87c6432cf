// One LISTEN connection per api process. The jobs_notify trigger sends every
// change of a job, and workers send stream deltas (deltas.ts); the hub hands
// both to whoever in this process subscribed to that job. After the connection is lost it reconnects with backoff and
// re-reads every subscribed job, so a change made while it was away (the
// final state included) still arrives.
import pg from 'pg';
import type { Logger } from 'pino';
import type { DatabasePool } from '../db/pool.ts';
import { retryWhileUnavailable } from '../db/unavailable.ts';
import { decodeDeltas, DELTA_CHANNEL, StreamMemory, type Delta } from './deltas.ts';
import { findJobsByIds } from './read.ts';
import { JobRow } from './schema.ts';

export type JobListener = (row: JobRow) => void;
export type DeltaListener = (delta: Delta) => void;
export type ChannelHandler = (payload: string) => void;

const CHANNEL = 'job_events';
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

export class JobEventHub {
  private client: pg.Client | null = null;
  private listeners = new Map<string, Set<JobListener>>();
  private deltaListeners = new Map<string, Set<DeltaListener>>();
  /** The text streamed so far of each job this process heard of, so a late subscriber starts from the beginning. */
  private readonly streamed = new StreamMemory();
  private stopped = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private attempt = 0;
  private readyPromise: Promise<void> | null = null;
  /** Other channels that ride on the same connection (e.g. agent auth cache invalidation). */
  private channels = new Map<string, Set<ChannelHandler>>();
  private listening = new Map<string, Promise<void>>();
  private listenQueue: Promise<unknown> = Promise.resolve();
  private connectionListeners = new Set<(connected: boolean) => void>();
  /** Told of every job change this process hears (the operator console's live pages). */
  private anyJobListeners = new Set<() => void>();

  constructor(
    private readonly connectionString: string,
    private readonly pool: DatabasePool,
    private readonly logger: Logger,
    /** The worker listens only to its own channels, not to every job change. */
    private readonly options: { jobEvents?: boolean; applicationName?: string } = {},
  ) {}

  get connected(): boolean {
    return this.client !== null;
  }

  /** The server process id of the LISTEN connection (tests terminate it). */
  backendPid(): number | null {
    return (this.client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  async start(): Promise<void> {
    this.readyPromise ??= this.connect(false);
    return this.readyPromise;
  }

  subscribe(jobId: string, listener: JobListener): () => void {
    return addListener(this.listeners, jobId, listener);
  }

  /** The text a job's current attempt has streamed so far, as far as this process heard it in one piece. */
  streamedSoFar(jobId: string): Delta | null {
    return this.streamed.get(jobId);
  }

  /** Stream deltas of a job (best effort: none are sent again after a reconnect). */
  subscribeDeltas(jobId: string, listener: DeltaListener): () => void {
    return addListener(this.deltaListeners, jobId, listener);
  }

  /** Called (without the row) on every job change heard; cheap: no parse beyond the one every change gets. */
  onAnyJobChange(listener: () => void): () => void {
    this.anyJobListeners.add(listener);
    return () => this.anyJobListeners.delete(listener);
  }

  /** Listens on another channel over the same connection (also after reconnects). */
  async listen(channel: string, handler: ChannelHandler): Promise<void> {
    // Quoted in LISTEN: Graphile Worker's own channel is jobs:insert.
    if (!/^[a-z_:]+$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    const handlers = this.channels.get(channel);
    if (handlers) {
      handlers.add(handler);
      return this.listening.get(channel); // resolves once LISTEN is in place
    }
    this.channels.set(channel, new Set([handler]));
    // A connection that drops meanwhile listens again when it reconnects.
    // One statement at a time on the connection (pg deprecates overlapping queries).
    const client = this.client;
    this.listenQueue = this.listenQueue.catch(() => undefined).then(() => client?.query(`listen "${channel}"`));
    const done = this.listenQueue
      .then(() => undefined)
      .catch((error) => this.logger.debug({ err: error, channel }, 'listen deferred to the next connection'));
    this.listening.set(channel, done);
    return done;
  }

  /** Called with false when the connection is lost and true when it is back. */
  onConnectionChange(listener: (connected: boolean) => void): () => void {
    this.connectionListeners.add(listener);
    return () => this.connectionListeners.delete(listener);
  }

  private announce(connected: boolean) {
    for (const listener of this.connectionListeners) listener(connected);
  }

  subscriberCount(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = null;
    this.listeners.clear();
    this.deltaListeners.clear();
    await client?.end().catch(() => undefined);
  }

  private async connect(isReconnect: boolean): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: this.options.applicationName ?? 'api-job-events',
    });
    client.on('notification', (message) => {
      if (message.channel === CHANNEL && message.payload) this.onNotification(message.payload);
      else if (message.channel === DELTA_CHANNEL && message.payload) this.onDeltas(message.payload);
      else if (message.payload !== undefined)
        this.callEach(this.channels.get(message.channel), message.payload, `channel ${message.channel}`);
    });
    const lost = (error?: Error) => {
      if (this.client !== client) return;
      this.client = null;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      this.announce(false);
      if (this.stopped) return;
      this.logger.warn({ err: error }, 'job events: LISTEN connection lost; reconnecting');
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      if (this.options.jobEvents !== false) await client.query(`listen ${CHANNEL}; listen ${DELTA_CHANNEL}`);
      for (const channel of this.channels.keys()) await client.query(`listen "${channel}"`);
    } catch (error) {
      // Not ours yet (`lost` ignores it): a half-made connection is closed here, not left open.
      client.removeAllListeners('notification');
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.stopped) {
      await client.end();
      return;
    }
    this.client = client;
    this.attempt = 0;
    this.announce(true);
    if (isReconnect) {
      this.logger.info({ subscribed: this.listeners.size }, 'job events: reconnected; re-reading subscribed jobs');
      // Again while the database is away (the pool may still reach a server
      // that went away); done, without a read, once this connection is not
      // the one listening any more.
      void retryWhileUnavailable(() => (this.client === client && !this.stopped ? this.resync() : Promise.resolve()), {
        onWait: (error) => this.logger.warn({ err: error }, 'job events: re-reading subscribed jobs failed; retrying'),
      }).catch((error) => this.logger.error({ err: error }, 'job events: could not re-read subscribed jobs'));
    }
  }

  private scheduleReconnect(): void {
    const delay = Math.min(5_000, 100 * 2 ** this.attempt++);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.connect(true).catch((error) => {
        this.logger.warn({ err: error, delay }, 'job events: reconnect failed');
        if (!this.stopped) this.scheduleReconnect();
      });
    }, delay);
    this.reconnectTimer.unref();
  }

  /** Re-reads every job someone here is subscribed to and delivers it. */
  async resync(): Promise<void> {
    const ids = [...this.listeners.keys()];
    for (let i = 0; i < ids.length; i += 500) {
      const rows = await findJobsByIds(this.pool, ids.slice(i, i + 500));
      for (const row of rows) this.dispatch(row);
    }
  }

  private onDeltas(payload: string): void {
    for (const delta of decodeDeltas(payload)) {
      this.streamed.add(delta);
      this.callEach(this.deltaListeners.get(delta.jobId), delta, delta.jobId);
    }
  }

  private onNotification(payload: string): void {
    this.callEach(this.anyJobListeners, undefined, 'any job');
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      this.logger.warn('job events: ignoring a notification that is not JSON');
      return;
    }
    const id = (parsed as { id?: unknown }).id;
    if (typeof id === 'string' && FINAL.has((parsed as { status?: string }).status ?? '')) this.streamed.forget(id);
    if (typeof id !== 'string' || !this.listeners.has(id)) return;
    if ((parsed as { truncated?: boolean }).truncated) {
      // Too large for NOTIFY: read the row itself.
      findJobsByIds(this.pool, [id])
        .then((rows) => {
          for (const row of rows) this.dispatch(row);
        })
        .catch((error) => this.logger.warn({ err: error, jobId: id }, 'job events: could not read a changed job'));
      return;
    }
    const row = JobRow.safeParse(parsed);
    if (row.success) this.dispatch(row.data);
    else this.logger.warn({ jobId: id }, 'job events: notification did not match the job shape');
  }

  private dispatch(row: JobRow): void {
    this.callEach(this.listeners.get(row.id), row, row.id);
  }

  /**
   * Calls each listener; one that throws is logged and does not stop the
   * others (nor, thrown inside pg's notification event, the process).
   */
  private callEach<T>(set: Set<(value: T) => void> | undefined, value: T, what: string): void {
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(value);
      } catch (error) {
        this.logger.error({ err: error, listening: what }, 'job events: listener failed');
      }
    }
  }
}

/** Adds a listener of one job; returns what removes it (and the job's set once empty). */
function addListener<L>(map: Map<string, Set<L>>, jobId: string, listener: L): () => void {
  let set = map.get(jobId);
  if (!set) {
    set = new Set();
    map.set(jobId, set);
  }
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && map.get(jobId) === set) map.delete(jobId);
  };
}
