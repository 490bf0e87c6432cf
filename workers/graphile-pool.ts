// The pg.Pool Graphile Worker runs on (and the worker's completion pool).
// Graphile Worker fires the release of a finished job (complete or fail)
// without awaiting it and retries only a few
// error codes, so a connection refused while PostgreSQL is down would be an
// unhandled rejection that ends the process. This pool waits for the
// database instead: a connection that cannot be made because the server is
// away is retried with backoff until it can, so the release lands once
// PostgreSQL is back. Queries on a connection that breaks mid-flight still
// fail; the worker recovers those (see workers/worker.ts).
import pg from 'pg';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../core/db/unavailable.ts';

const MAX_BACKOFF_MS = 2_000;

export class PatientPool extends pg.Pool {
  /** Set while connections are refused, so an outage is logged once, not per connection. */
  private unreachableSince: number | null = null;

  constructor(
    config: pg.PoolConfig,
    private readonly logger: Logger,
    /** Names the pool in its log lines. */
    private readonly label = 'graphile pool',
  ) {
    super(config);
    // An idle client whose server went away is dropped by the pool; without a
    // listener the 'error' event would throw.
    this.on('error', (error) => logger.debug({ reason: error.message }, `${label}: idle connection lost`));
    // Likewise a checked-out client (Graphile's LISTEN connection) whose
    // socket breaks: the error resurfaces on its next query.
    this.on('connect', (client) =>
      client.on('error', (error) => logger.debug({ reason: error.message }, `${label}: connection lost`)),
    );
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(
    callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ): void;
  override connect(
    callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ) {
    // Graphile's LISTEN connection can be released twice when the server
    // ends it while its pool is stopping (once by the stop, once by the
    // failed LISTEN); pg-pool throws on the second, inside a promise nobody
    // awaits. The client went back once: a second release has nothing to do.
    if (callback) return super.connect((error, client, done) => callback(error, client, releasedOnce(done)));
    return this.connectWhenReachable();
  }

  private async connectWhenReachable(): Promise<pg.PoolClient> {
    for (let attempt = 0; ; attempt++) {
      try {
        const client = await super.connect();
        if (this.unreachableSince !== null) {
          this.logger.info({ downMs: Date.now() - this.unreachableSince }, `${this.label}: database reachable again`);
          this.unreachableSince = null;
        }
        return client;
      } catch (error) {
        if (this.ending || !isDatabaseUnavailable(error)) throw error;
        if (this.unreachableSince === null) {
          this.unreachableSince = Date.now();
          this.logger.warn({ reason: (error as Error).message }, `${this.label}: database unreachable; waiting for it`);
        }
        const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.min(attempt, 10)) * (0.75 + Math.random() / 2);
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}

function releasedOnce(done: (release?: unknown) => void): (release?: unknown) => void {
  let released = false;
  return (release) => {
    if (released) return;
    released = true;
    done(release);
  };
}
