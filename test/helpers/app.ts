// The api as the tests use it: buildApp on a fresh database, with its pool,
// LISTEN hub and group committer; everything closed when the test ends.
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import { buildApp } from '../../api/app.ts';
import type { Config } from '../../core/config.ts';
import { createDatabasePool, type DatabasePool } from '../../core/db/pool.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { testConfig, testLogger } from './config.ts';
import { createTestDatabase } from './db.ts';
import { startFakeOpenAI } from './fake-providers.ts';

export type TestApi = {
  app: FastifyInstance;
  db: DatabasePool;
  hub: JobEventHub;
  config: Config;
  /** Everything the app logged so far (set LOG_LEVEL in the overrides to see more). */
  logs: () => string;
  close: () => Promise<void>;
};

export async function buildTestApp(
  t: Test,
  databaseUrl: string,
  overrides: Record<string, string> = {},
): Promise<TestApi> {
  const config = testConfig(databaseUrl, overrides);
  const db = await createDatabasePool(databaseUrl, { maximumPoolSize: 5 });
  const hub = new JobEventHub(databaseUrl, db, testLogger('job-events'));
  await hub.start();
  // Logs are kept in memory, so tests can check what was (never) logged.
  const lines: string[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const app = await buildApp({ config, db, jobEvents: hub, jobs: new GroupCommitter(db) }, { logStream });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await app.close();
    await hub.stop();
    await db.end().catch(() => undefined); // throws after a connection died in an outage test
  };
  t.teardown(close);
  return { app, db, hub, config, logs: () => lines.join(''), close };
}

/** Same, listening on a random port (for websockets and real HTTP clients). */
export async function startTestServer(t: Test, databaseUrl: string, overrides: Record<string, string> = {}) {
  const api = await buildTestApp(t, databaseUrl, overrides);
  const url = await api.app.listen({ host: '127.0.0.1', port: 0 });
  return { ...api, url, wsUrl: `${url.replace(/^http/, 'ws')}/api/ws` };
}

/**
 * A test database and a listening server whose OpenAI provider is a local
 * fake (fake-providers.ts) accepting `apiKey`; `overrides` point workers at it too.
 */
export async function startTestServerWithFakeOpenAI(t: Test, apiKey: string) {
  const openai = await startFakeOpenAI({ apiKey });
  t.teardown(() => openai.close());
  const databaseUrl = await createTestDatabase(t);
  const overrides = { OPENAI_BASE_URL: openai.url };
  const api = await startTestServer(t, databaseUrl, overrides);
  return { ...api, openai, databaseUrl, overrides };
}

/**
 * Listening on a port chosen first, so BASE_URL and AUTH_URL are the real
 * address: needed where clients check issuers and resources (OAuth).
 */
export async function startTestServerAtOwnUrl(t: Test, databaseUrl: string, overrides: Record<string, string> = {}) {
  const { freePort } = await import('../../ops/embedded-postgres.ts');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const api = await buildTestApp(t, databaseUrl, { BASE_URL: base, PORT: String(port), ...overrides });
  await api.app.listen({ host: '127.0.0.1', port });
  return { ...api, url: base, wsUrl: `ws://127.0.0.1:${port}/api/ws` };
}
