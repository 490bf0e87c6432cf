// The api as a library: its pool, LISTEN connection, group committer and
// Fastify app, started and stopped together (the api process, api/server.ts,
// and `npm start`, ops/start.ts, both run it).
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../core/config.ts';
import { createDatabasePool } from '../core/db/pool.ts';
import { COUNT_FOLD_MS, keepFoldingAccountCounts } from '../core/jobs/counts.ts';
import { JobEventHub } from '../core/jobs/events.ts';
import { GroupCommitter } from '../core/jobs/group-commit.ts';
import { logStream } from '../core/logger.ts';

export type RunningApi = { app: FastifyInstance; url: string; stop: () => Promise<void> };

export async function startApi(config: Config, databaseUrl: string, logger: Logger): Promise<RunningApi> {
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: config.dbPoolMax });
  const jobEvents = new JobEventHub(databaseUrl, db, logger.child({ component: 'job-events' }));
  try {
    await jobEvents.start();
  } catch (error) {
    await db.end();
    throw error;
  }
  const jobs = new GroupCommitter(db, { logger });
  const stopFolding = keepFoldingAccountCounts(db, logger, COUNT_FOLD_MS);
  // Loaded here, not at the top: the entries' refusals (bad settings, no
  // database, busy port, old schema) answer without loading every route.
  const { buildApp } = await import('./app.ts');
  // Request logs as readable lines where LOG_FORMAT asks for them (JSON otherwise).
  const app = await buildApp(
    { config, db, jobEvents, jobs },
    { logStream: logStream({ format: config.logFormat, nodeEnv: config.nodeEnv }) },
  );
  const url = await app.listen({ host: config.host, port: config.port });
  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      // Stop accepting, let in-flight requests finish, close websockets with
      // a close frame; then the LISTEN connection and the pool.
      await app.close();
      stopFolding();
      await jobEvents.stop();
      // slonik's end() throws when a connection died during a database
      // outage; everything else is closed by now, so it must not fail the stop.
      await db.end().catch((error) => logger.debug({ err: error }, 'database pool ended with an error'));
    })());
  return { app, url, stop };
}
