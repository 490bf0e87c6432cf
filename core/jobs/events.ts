// One LISTEN connection per api process. Every statement that changes jobs
// sends one lean notification on job_events (jobs_after_update, 0054): per
// changed job its id, version and tenant, nothing else. Workers send stream
// deltas on job_deltas (deltas.ts). The hub looks each id up in what this
// process follows before anything else, so the jobs nobody here follows cost
// a string split; it re-reads the followed ones (all ids of one turn of the
// event loop in one query, one read at a time) and hands each listener only
// rows newer than the last it was given, so states arrive in order and the
// final one always arrives (quick changes may come merged into the latest).
// Deltas are decoded only for followed jobs, and kept per job so a late
// subscriber starts from the beginning; a missed piece asks the worker to
// send the stream again (job_stream_replay). After the connection is lost it
// reconnects with backoff and re-reads every subscribed job, so a change
// made while it was away (the final state included) still arrives.
import pg from 'pg';
import type { Logger } from 'pino';
import type { DatabasePool } from '../db/pool.ts';
import { retryWhileUnavailable } from '../db/unavailable.ts';
import { DELTA_CHANNEL, type Delta } from './deltas.ts';
import { findJobsByIds } from './read.ts';
import { isFinal, type JobRow } from './schema.ts';
import { StreamFollows, type DeltaListener } from './stream-follows.ts';

export type JobListener = (row: JobRow) => void;
export type { DeltaListener };
export type ChannelHandler = (payload: string) => void;

const CHANNEL = 'job_events';
/** Jobs re-read in one query. */
const READ_BATCH = 500;

export class JobEventHub {
  private client: pg.Client | null = null;
  private listeners = new Map<string, Set<JobListener>>();
  /** The stream deltas of followed jobs, and their text so far. */
  private readonly streams: StreamFollows;
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
  /** The latest version handed to the listeners of each followed job. */
  private readonly delivered = new Map<string, number>();
  /** Followed jobs that changed and are still to be read. */
  private readonly toRead = new Set<string>();
  private reading = false;
  /** Ends the waits of reads through an outage once the hub stops. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly connectionString: string,
    private readonly pool: DatabasePool,
    private readonly logger: Logger,
    /** The worker listens only to its own channels, not to every job change. */
    private readonly options: { jobEvents?: boolean; applicationName?: string } = {},
  ) {
    this.streams = new StreamFollows(pool, logger, {
      callEach: (set, delta, jobId) => this.callEach(set, delta, jobId),
      following: (any) => this.listenToDeltas(any),
    });
  }

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
    const remove = addListener(this.listeners, jobId, listener);
    return () => {
      remove();
      if (!this.listeners.has(jobId)) this.delivered.delete(jobId);
    };
  }

  /** The text a job's current attempt has streamed so far, as far as this process heard it in one piece. */
  streamedSoFar(jobId: string): Delta | null {
    return this.streams.soFar(jobId);
  }

  /** Stream deltas of a job (best effort: none are sent again after a reconnect). */
  subscribeDeltas(jobId: string, listener: DeltaListener): () => void {
    return this.streams.follow(jobId, listener);
  }

  /** Called (without the row) once per job_events notification heard, which names one or more changed jobs. */
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
    this.stopping.abort();
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = null;
    this.listeners.clear();
    this.streams.clear();
    this.delivered.clear();
    await client?.end().catch(() => undefined);
  }

  private async connect(isReconnect: boolean): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: this.options.applicationName ?? 'api-job-events',
    });
    client.on('notification', (message) => {
      if (message.channel === CHANNEL && message.payload) this.onNotification(message.payload);
      else if (message.channel === DELTA_CHANNEL && message.payload) this.streams.heard(message.payload);
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
      if (this.options.jobEvents !== false) await client.query(`listen ${CHANNEL}`);
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
    if (this.streams.hearing) this.listenToDeltas(true);
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

  /**
   * Deltas are heard only while someone here follows a stream: an api whose
   * sockets follow none is not even sent them. (A stream whose beginning
   * was missed meanwhile is sent again, stream-follows.ts.)
   */
  private listenToDeltas(on: boolean): void {
    const client = this.client;
    if (!client || this.options.jobEvents === false) return; // connect() listens if someone follows by then
    this.listenQueue = this.listenQueue
      .catch(() => undefined)
      .then(() => client.query(`${on ? 'listen' : 'unlisten'} ${DELTA_CHANNEL}`))
      .catch((error) => this.logger.debug({ err: error }, 'job events: (un)listen of deltas deferred'));
  }

  /** Re-reads every job someone here is subscribed to and delivers it. */
  async resync(): Promise<void> {
    const ids = [...this.listeners.keys()];
    for (let i = 0; i < ids.length; i += READ_BATCH) {
      const rows = await findJobsByIds(this.pool, ids.slice(i, i + READ_BATCH));
      for (const row of rows) this.dispatch(row);
    }
  }

  /** `<jobId>:<version>:<tenantId>` per changed job, comma-separated: only followed jobs go further. */
  private onNotification(payload: string): void {
    this.callEach(this.anyJobListeners, undefined, 'any job');
    if (this.listeners.size === 0) return;
    for (const entry of payload.split(',')) {
      const end = entry.indexOf(':');
      const id = end < 0 ? entry : entry.slice(0, end);
      if (!this.listeners.has(id)) continue;
      const version = Number.parseInt(entry.slice(end + 1), 10);
      if (!(version <= (this.delivered.get(id) ?? 0))) this.toRead.add(id);
    }
    if (this.toRead.size > 0 && !this.reading) {
      this.reading = true;
      // After the rest of this socket read: its other notifications join the same query.
      queueMicrotask(() => void this.readChanged());
    }
  }

  /** Reads the changed followed jobs, one query at a time; what changes meanwhile goes in the next. */
  private async readChanged(): Promise<void> {
    try {
      while (this.toRead.size > 0 && !this.stopped) {
        const ids = [...this.toRead].slice(0, READ_BATCH);
        for (const id of ids) this.toRead.delete(id);
        try {
          const rows = await retryWhileUnavailable(() => findJobsByIds(this.pool, ids), {
            signal: this.stopping.signal,
            onWait: (error) => this.logger.warn({ err: error }, 'job events: reading changed jobs failed; retrying'),
          });
          for (const row of rows) this.dispatch(row);
        } catch (error) {
          if (this.stopped) return;
          // Not lost: read again in a second (the change may be a final state).
          this.logger.warn({ err: error, jobs: ids.length }, 'job events: could not read changed jobs; trying again');
          await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
          for (const id of ids) if (this.listeners.has(id)) this.toRead.add(id);
        }
      }
    } finally {
      this.reading = false;
    }
  }

  /** Hands a followed job's row to its listeners, if newer than the last they were given. */
  private dispatch(row: JobRow): void {
    const set = this.listeners.get(row.id);
    if (!set || row.version <= (this.delivered.get(row.id) ?? 0)) return;
    this.delivered.set(row.id, row.version);
    if (isFinal(row.status)) this.streams.ended(row.id);
    this.callEach(set, row, row.id);
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
