// Scale-out: the platform as separate OS processes on the bench's PostgreSQL, as
// an operator runs it (1 vs 2 `start:worker`, 1 vs 2 `start:api`). On a 2-core
// machine with PostgreSQL on the same cores this measures what more processes
// cost, not a speed-up: workers coordinate through PostgreSQL (SKIP LOCKED on one
// queue), and every api LISTENs to the job events (each NOTIFY fans out to all).
import http from 'node:http';
import { z } from 'zod';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { loadConfig } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { freePort } from '../embedded-postgres.ts';
import { chatSendLoad } from './chat-load.ts';
import { postJson, sleep } from './measure.ts';
import { spawnEntry, stopAll, waitForHealth, type PlatformProcess } from './processes.ts';
import { resetQueues, type BenchContext } from './scenarios.ts';

export type ScaleOutFigures = { jobs: { one: number; two: number }; sends: { one: number; two: number } };

const TENANTS = 4;
const CLIENTS = 32;

/** Drains a backlog of no-op jobs with `count` worker processes; jobs succeeded per second. */
async function drainWith(
  ctx: BenchContext,
  env: Record<string, string>,
  workers: number,
  tenants: string[],
  backlog: number,
): Promise<number> {
  await resetQueues(ctx);
  const workerEnv = { ...env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' };
  const procs: PlatformProcess[] = [];
  try {
    for (let i = 0; i < workers; i++) procs.push(spawnEntry(`worker ${i + 1}`, 'workers/runner.ts', workerEnv));
    // Start-up (tsx, schema check, Graphile) is not counted: the clock starts
    // once every worker listens and the backlog is committed.
    await Promise.all(procs.map((p) => p.logged('worker started')));
    await ctx.db.transaction((tx) =>
      enqueueJobs(
        tx,
        Array.from({ length: backlog }, (_, i) => ({ kind: 'diag.noop', tenantId: tenants[i % tenants.length]! })),
      ),
    );
    const t0 = performance.now();
    const deadline = t0 + 120_000 + backlog * 20;
    for (;;) {
      const { succeeded, failed } = await ctx.db.one(sql.type(z.object({ succeeded: z.number(), failed: z.number() }))`
        select count(*) filter (where status = 'succeeded')::int as succeeded, count(*) filter (where status = 'failed')::int as failed
        from jobs where kind = 'diag.noop'`);
      if (succeeded >= backlog) break;
      if (failed > 0) throw new Error(`scale-out: ${failed} no-op jobs failed`);
      const dead = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
      if (dead) throw new Error(`scale-out: ${dead.name} exited while draining:\n${dead.tail()}`);
      if (performance.now() > deadline)
        throw new Error(
          `scale-out: ${succeeded} of ${backlog} jobs after ${Math.round((performance.now() - t0) / 1000)} s`,
        );
      await sleep(20);
    }
    return backlog / ((performance.now() - t0) / 1000);
  } finally {
    await stopAll(procs);
  }
}

/** Chat sends accepted/s with CLIENTS keep-alive clients spread over `apis` api processes (no worker). */
async function sendsWith(
  ctx: BenchContext,
  env: Record<string, string>,
  apis: number,
  auth: { token: string; tenantId: string },
  baseUrl: string,
): Promise<number> {
  const headers = { authorization: `Bearer ${auth.token}`, 'x-tenant-id': auth.tenantId };
  await resetQueues(ctx);
  const ports = await Promise.all(Array.from({ length: apis }, () => freePort()));
  const procs = ports.map((port, i) =>
    // One BASE_URL for all, as behind a load balancer: it is the tokens' issuer.
    spawnEntry(`api ${i + 1}`, 'api/server.ts', {
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
      BASE_URL: baseUrl,
      LOG_FORMAT: 'json',
    }),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  try {
    await Promise.all(procs.map((p, i) => waitForHealth(p, ports[i]!)));
    const sessions: string[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const res = await postJson(agent, ports[i % apis]!, '/api/chat/sessions', headers, '{}');
      if (res.status !== 201 && res.status !== 200)
        throw new Error(`scale-out: create session answered ${res.status}: ${res.body}`);
      sessions.push((JSON.parse(res.body) as { id: string }).id);
    }
    // The clients run in a child process (chat-load.ts); connection n talks to
    // api n % apis, the sends go round-robin over the sessions.
    const load = { ports, ...auth, sessions, connections: CLIENTS };
    await chatSendLoad({ ...load, seconds: 1, keyPrefix: `scale-out-${process.pid}-${apis}-warm` }); // every process compiles its hot paths
    await resetQueues(ctx);
    return (await chatSendLoad({ ...load, seconds: ctx.seconds, keyPrefix: `scale-out-${process.pid}-${apis}` }))
      .perSecond;
  } finally {
    agent.destroy();
    await stopAll(procs);
  }
}

export async function scaleOutFigures(ctx: BenchContext, env: Record<string, string>): Promise<ScaleOutFigures> {
  const tenants: string[] = [];
  for (let i = 1; i <= TENANTS; i++) {
    tenants.push(
      (await ctx.db.oneFirst(
        sql.unsafe`insert into tenants (name) values (${`bench scale-out ${i}`}) returning id`,
      )) as string,
    );
  }
  const backlog = Math.max(1000, Math.round(1250 * ctx.seconds));
  const jobs = {
    one: await drainWith(ctx, env, 1, tenants, backlog),
    two: await drainWith(ctx, env, 2, tenants, backlog),
  };

  // Chat: an enterprise tenant (its monthly message allowance outlasts the bench) and an admin.
  const tenantId = (await ctx.db.oneFirst(
    sql.unsafe`insert into tenants (name, plan) values ('bench scale-out chat', 'enterprise') returning id`,
  )) as string;
  const userId = (await ctx.db.oneFirst(
    sql.unsafe`insert into users (email) values ('scale-out-bench@bench.test') returning id`,
  )) as string;
  await ctx.db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
  );
  const baseUrl = 'http://localhost'; // the load balancer's address: never called, only the tokens' issuer
  const config = loadConfig({ ...env, BASE_URL: baseUrl });
  const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.baseUrl);
  const auth = { token, tenantId };
  const sends = { one: await sendsWith(ctx, env, 1, auth, baseUrl), two: await sendsWith(ctx, env, 2, auth, baseUrl) };
  return { jobs, sends };
}
