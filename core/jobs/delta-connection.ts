// A worker's own connection for its stream deltas (deltas.ts): a NOTIFY never
// waits behind a claim, a completion or a row lock on a shared pool. The same
// connection LISTENs for apis asking a stream to be sent again from its
// beginning. While PostgreSQL is away it waits for it (backing off, one log
// line per outage), and after the connection is lost it connects again at
// once, so its LISTEN stays in place.
import pg from 'pg';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../db/unavailable.ts';

const MAX_BACKOFF_MS = 2_000;

export class DeltaConnection {
  private client: pg.Client | null = null;
  private opening: Promise<pg.Client> | null = null;
  private ended = false;
  /** Cleared as the worker stops: a last flush then fails at once instead of waiting out an outage. */
  private patient = true;
  private unreachableSince: number | null = null;
  private down: Promise<null> | null = null;
  private markDown: (() => void) | null = null;

  constructor(
    private readonly connectionString: string,
    private readonly logger: Logger,
    /** LISTENed on this connection; told each payload. */
    private readonly listen: { channel: string; handler: (payload: string) => void },
  ) {}

  /** Opens the connection now (the worker's start), so its LISTEN is in place before the first turn. */
  async start(): Promise<void> {
    await this.connection();
  }

  /**
   * Sends on the open connection. While the database is known to be away it
   * fails at once, and a connection being made is awaited only until its
   * first attempt fails: deltas are best effort, and a turn's flush must not
   * wait out an outage (the final state carries the text).
   */
  async query(text: string, values: unknown[]): Promise<void> {
    const client =
      this.client ?? (this.unreachableSince === null ? await Promise.race([this.connection(), this.whenDown()]) : null);
    if (!client) throw new Error('stream deltas: the database is unreachable; these deltas are dropped');
    try {
      await client.query(text, values);
    } catch (error) {
      // node-postgres gives a timed-out query up but keeps the connection busy with it: start over on a new one.
      if (/timeout/i.test((error as Error).message) && this.client === client) void client.end().catch(() => undefined);
      throw error;
    }
  }

  /** Resolves (with null) when a connection attempt finds the database away. */
  private whenDown(): Promise<null> {
    this.down ??= new Promise((resolve) => {
      this.markDown = () => resolve(null);
    });
    return this.down;
  }

  /** From now on a connection that cannot be made is not waited for. */
  impatient(): void {
    this.patient = false;
  }

  async end(): Promise<void> {
    this.ended = true;
    const client = this.client ?? (await this.opening?.catch(() => null));
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private connection(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.opening ??= this.open().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async open(): Promise<pg.Client> {
    for (let attempt = 0; ; attempt++) {
      if (this.ended) throw new Error('the stream delta connection was ended');
      // A NOTIFY commits a transaction id: without this, each flush would wait for its WAL to reach the disk.
      const client = new pg.Client({
        connectionString: this.connectionString,
        application_name: 'worker-deltas',
        options: '-c synchronous_commit=off',
        // A NOTIFY takes milliseconds; one that hangs (a connection gone without a word) is given up.
        query_timeout: 5_000,
        connectionTimeoutMillis: 5_000,
        keepAlive: true,
      });
      client.on('notification', (m) => {
        if (m.channel === this.listen.channel && m.payload) this.listen.handler(m.payload);
      });
      const lost = (error?: Error) => {
        if (this.client !== client) return;
        this.client = null;
        client.end().catch(() => undefined);
        if (this.ended) return;
        this.logger.debug({ reason: error?.message }, 'stream deltas: connection lost; connecting again');
        this.connection().catch((e) => this.logger.warn({ err: e }, 'stream deltas: could not connect again'));
      };
      client.on('error', lost);
      client.on('end', () => lost());
      try {
        await client.connect();
        await client.query(`listen ${this.listen.channel}`);
      } catch (error) {
        client.removeAllListeners('notification');
        await client.end().catch(() => undefined);
        if (this.ended || !this.patient || !isDatabaseUnavailable(error)) throw error;
        this.markDown?.();
        this.down = null;
        this.markDown = null;
        if (this.unreachableSince === null) {
          this.unreachableSince = Date.now();
          this.logger.warn({ reason: (error as Error).message }, 'stream deltas: database unreachable; waiting for it');
        }
        const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(attempt, 10)) * (0.75 + Math.random() / 2);
        await new Promise((resolve) => setTimeout(resolve, delay));
        continue;
      }
      if (this.ended) {
        await client.end().catch(() => undefined);
        throw new Error('the stream delta connection was ended');
      }
      if (this.unreachableSince !== null) {
        this.logger.info({ downMs: Date.now() - this.unreachableSince }, 'stream deltas: database reachable again');
        this.unreachableSince = null;
      }
      this.client = client;
      return client;
    }
  }
}
