// The scale model (BENCH_SCALE=<factor>): the same requests timed on the
// bench's nearly empty database and again after it holds a platform's worth
// of history: at factor 1, 10,000 tenants, 100,000 chat sessions, 2,000,000
// messages, 10,000,000 finished jobs and 1,000,000 usage records, seeded in
// a few set-based statements (generate_series; triggers off for the load,
// as a restore would run them). Each figure is a p50 of in-process requests
// (app.inject: the route and its queries, no sockets), for one probe tenant
// whose own data stays small, as most tenants' is.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../api/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { createRegistration } from '../../core/identity/registrations.ts';
import { AGENT_SCOPES, resources, signAccessToken } from '../../core/identity/tokens.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { isFinal } from '../../core/jobs/schema.ts';
import { startWorker } from '../../workers/worker.ts';
import { percentile } from './measure.ts';
import type { BenchContext } from './scenarios.ts';

export const SCALE_FIGURES = [
  'chat send',
  'chat send -> started (enqueue to start, a worker waiting)',
  'chat send -> final state (built-in model, a worker running)',
  'activity: sessions page',
  "activity: a session's entries page",
  'GET /api/chat/jobs/:id',
  'GET /api/agent/v1/me',
] as const;
export type ScaleFigure = (typeof SCALE_FIGURES)[number];

export type Probe = {
  app: FastifyInstance;
  close: () => Promise<void>;
  requests: Record<ScaleFigure, () => Promise<number>>;
};

/** A probe tenant with a person, a session with a few turns, and a claimed agent; one request per figure. */
export async function probe(ctx: BenchContext, config: Config): Promise<Probe> {
  const hub = new JobEventHub(ctx.url, ctx.db, ctx.logger);
  await hub.start();
  const app = await buildApp({
    config: { ...config, logLevel: 'warn' },
    db: ctx.db,
    jobEvents: hub,
    jobs: new GroupCommitter(ctx.db),
  });
  await app.ready();
  const userId = randomUUID();
  const tenantId = randomUUID();
  await ctx.db.transaction(async (tx) => {
    await tx.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@scale.bench`})`);
    await tx.query(sql.unsafe`insert into tenants (id, name, plan) values (${tenantId}, 'scale probe', 'enterprise')`);
    await tx.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
    );
  });
  const headers = {
    authorization: `Bearer ${await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.authUrl)}`,
    'x-tenant-id': tenantId,
  };
  const sessionId = (
    await app.inject({ method: 'POST', url: '/api/chat/sessions', headers, payload: { title: 'Probe' } })
  ).json().id as string;
  let n = 0;
  const send = async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/chat/send',
      headers: { ...headers, 'idempotency-key': `scale-${randomUUID()}` },
      payload: { sessionId, message: `probe ${++n}` },
    });
    if (res.statusCode !== 202) throw new Error(`scale: chat send answered ${res.statusCode}: ${res.body}`);
    return res.json().jobId as string;
  };
  const jobId = await send();
  const worker = await startWorker({
    config: { ...config, logLevel: 'warn' },
    databaseUrl: ctx.url,
    logger: ctx.logger,
    concurrency: 4,
  });
  /** Resolves once the job's status passes `done`: from its events, or from a read if it got there before the subscription. */
  const reaches = (id: string, done: (status: string) => boolean) =>
    new Promise<void>((resolve) => {
      const seen = (status: string) => {
        if (!done(status)) return;
        off();
        resolve();
      };
      const off = hub.subscribe(id, (row) => seen(row.status));
      // It may have finished before the subscription: read it once.
      void ctx.db
        .oneFirst(sql.unsafe`select status from jobs where id = ${id}`)
        .then((status) => seen(status as string));
    });
  const final = (id: string) => reaches(id, isFinal);
  await final(jobId);
  const { registration } = await createRegistration(ctx.db, { type: 'anonymous', ip: '10.9.9.9', claimTokenTtlS: 600 });
  await ctx.db.query(
    sql.unsafe`update agent_registrations set claim_state = 'claimed', claimed_by = ${userId}, claimed_at = now() where id = ${registration.id}`,
  );
  await ctx.db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${registration.tenant_id}, ${userId}, 'admin')`,
  );
  const agentToken = await signAccessToken(
    app.idpKeys,
    config.authUrl,
    resources(config.baseUrl).agent,
    {
      principalId: registration.principal_id,
      registrationId: registration.id,
      tenantId: registration.tenant_id,
      scopes: [...AGENT_SCOPES],
    },
    3600,
  );
  const get = (url: string, h: Record<string, string>) => async () => {
    const started = performance.now();
    const res = await app.inject({ url, headers: h });
    if (res.statusCode !== 200) throw new Error(`scale: GET ${url} answered ${res.statusCode}: ${res.body}`);
    return performance.now() - started;
  };
  return {
    app,
    close: async () => {
      await worker.stop();
      await app.close();
      await hub.stop();
    },
    requests: {
      'chat send': async () => {
        const started = performance.now();
        await send();
        return performance.now() - started;
      },
      'chat send -> started (enqueue to start, a worker waiting)': async () => {
        const started = performance.now();
        await reaches(await send(), (status) => status !== 'queued');
        return performance.now() - started;
      },
      'chat send -> final state (built-in model, a worker running)': async () => {
        const started = performance.now();
        await final(await send());
        return performance.now() - started;
      },
      'activity: sessions page': get('/api/activity/sessions?limit=20', headers),
      "activity: a session's entries page": get(`/api/activity/sessions/${sessionId}/entries?limit=50`, headers),
      'GET /api/chat/jobs/:id': get(`/api/chat/jobs/${jobId}`, headers),
      'GET /api/agent/v1/me': get('/api/agent/v1/me', { authorization: `Bearer ${agentToken}` }),
    },
  };
}

/** p50 of each figure over `samples` requests, after a few uncounted ones. */
export async function scaleFigures(
  ctx: BenchContext,
  config: Config,
  samples: number,
): Promise<Record<ScaleFigure, number>> {
  const p = await probe(ctx, config);
  try {
    const out = {} as Record<ScaleFigure, number>;
    for (const figure of SCALE_FIGURES) {
      for (let i = 0; i < 20; i++) await p.requests[figure]();
      const times: number[] = [];
      for (let i = 0; i < samples; i++) times.push(await p.requests[figure]());
      out[figure] = percentile(times, 50);
    }
    return out;
  } finally {
    await p.close();
  }
}

export type Seeded = { seconds: number; rows: Record<string, number> };

/** Seeds `factor` times the model's volume (factor 1: 10M jobs ...). */
export async function seedScale(ctx: BenchContext, factor: number): Promise<Seeded> {
  const n = (x: number) => Math.max(1, Math.round(x * factor));
  const rows = {
    tenants: n(10_000),
    chat_sessions: n(100_000),
    chat_messages: n(2_000_000),
    jobs: n(10_000_000),
    usage_records: n(1_000_000),
  };
  const started = performance.now();
  await ctx.db.transaction(async (tx) => {
    // Triggers (notifications, counters, foreign key checks) off for the load: the rows are consistent by construction.
    await tx.query(sql.unsafe`set local session_replication_role = replica`);
    await tx.query(sql.unsafe`set local statement_timeout = 0`); // ten million rows take minutes
    await tx.query(
      sql.unsafe`create temp table scale_tenants on commit drop as select i, gen_random_uuid() as id from generate_series(1, ${rows.tenants}::int) i`,
    );
    await tx.query(sql.unsafe`insert into tenants (id, name, plan) select id, 'scale ' || i, 'pro' from scale_tenants`);
    await tx.query(sql.unsafe`create temp table scale_sessions on commit drop as
      select s as i, gen_random_uuid() as id, t.id as tenant_id from generate_series(1, ${rows.chat_sessions}::int) s join scale_tenants t on t.i = 1 + s % ${rows.tenants}::int`);
    await tx.query(sql.unsafe`insert into chat_sessions (id, tenant_id, title, model, created_at, updated_at)
      select id, tenant_id, 'Scale', 'openai/gpt-4o-mini', now() - (i % 720) * interval '1 hour', now() - (i % 720) * interval '1 hour' from scale_sessions`);
    await tx.query(sql.unsafe`insert into chat_messages (tenant_id, session_id, role, content, created_at)
      select s.tenant_id, s.id, case when m % 2 = 0 then 'user' else 'assistant' end, 'scale message ' || m, now() - (m % 2592000) * interval '1 second'
      from generate_series(1, ${rows.chat_messages}::int) m join scale_sessions s on s.i = 1 + m % ${rows.chat_sessions}::int`);
    await tx.query(sql.unsafe`insert into jobs (id, tenant_id, kind, status, attempts, max_attempts, result, version, created_at, started_at, finished_at, updated_at)
      select gen_random_uuid(), t.id, 'chat.turn', 'succeeded', 1, 8, '{"text":"ok"}'::jsonb, 3, at, at + interval '1 second', at + interval '2 seconds', at + interval '2 seconds'
      from generate_series(1, ${rows.jobs}::int) j join scale_tenants t on t.i = 1 + j % ${rows.tenants}::int,
        lateral (select now() - (j % 2592000) * interval '1 second' as at) x`);
    await tx.query(sql.unsafe`insert into usage_records (tenant_id, provider, model, input_tokens, output_tokens, cost_micros, credential, occurred_at)
      select t.id, 'openai', 'openai/gpt-4o-mini', 100, 50, 10, 'tenant_key', now() - (u % 2592000) * interval '1 second'
      from generate_series(1, ${rows.usage_records}::int) u join scale_tenants t on t.i = 1 + u % ${rows.tenants}::int`);
  });
  await ctx.db.transaction(async (tx) => {
    await tx.query(sql.unsafe`set local statement_timeout = 0`);
    await tx.query(sql.unsafe`analyze`);
  });
  return { seconds: (performance.now() - started) / 1000, rows };
}
