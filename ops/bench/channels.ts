// Channel figures: webhook-channel inbound messages accepted per second over
// HTTP (signature verified, stored once, chat turn enqueued; 32 clients, no
// worker running), and 1,000 concurrent link/wait waiters on one api
// process (their clients in a child process): the resident memory they add
// and how long after the binding message they are all answered (woken by
// one NOTIFY).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { buildApp } from '../../api/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import { signWebhook } from '../../core/channels/webhook.ts';
import type { Config } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { startLinkWaiters } from './link-waiters.ts';
import { percentile, profiled, sleep, throughput } from './measure.ts';
import type { BenchContext } from './scenarios.ts';

type Answer = { status: number; body: string; at: number };

function request(
  agent: http.Agent,
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: { ...headers, ...(body ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, at: performance.now() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export async function channelFigures(ctx: BenchContext, config: Config, waiters = 1000) {
  const hub = new JobEventHub(ctx.url, ctx.db, ctx.logger);
  await hub.start();
  const app = await buildApp({ config, db: ctx.db, jobEvents: hub, jobs: new GroupCommitter(ctx.db) });
  const marks: Record<string, number> = {};
  const mark = (name: string) => (marks[name] ??= performance.timeOrigin + performance.now());
  if (process.env.BENCH_DEBUG) {
    await hub.listen('channel_link_events', () => mark('notification'));
  }
  await app.listen({ host: '127.0.0.1', port: 0 });
  if (process.env.BENCH_DEBUG)
    app.server.prependListener(
      'request',
      (req: http.IncomingMessage) => req.url?.includes('/inbound/') && mark('inbound request'),
    );
  const port = (app.server.address() as { port: number }).port;
  const agent = new http.Agent({ keepAlive: true, maxSockets: waiters + 50 });
  try {
    const userId = randomUUID();
    const tenantId = (await ctx.db.oneFirst(
      sql.unsafe`insert into tenants (name, plan) values ('bench channels', 'enterprise') returning id`,
    )) as string;
    await ctx.db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@bench.test`})`);
    await ctx.db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
    );
    const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.authUrl);
    const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenantId, 'content-type': 'application/json' };
    const secret = 'bench-webhook-signing-secret-000';
    const saved = JSON.parse(
      (
        await request(
          agent,
          port,
          'POST',
          '/api/channels/webhook/config',
          headers,
          JSON.stringify({ callbackUrl: 'https://example.com/replies', signingSecret: secret }),
        )
      ).body,
    );
    const inboundPath = new URL(saved.inboundUrl).pathname;
    const { authorization: _a, ...plainHeaders } = headers;
    const inbound = (body: Record<string, unknown>) => {
      const raw = JSON.stringify(body);
      return request(agent, port, 'POST', inboundPath, { ...plainHeaders, ...signWebhook(secret, raw) }, raw);
    };

    // 1,000 waiters: memory before/after, then one binding message wakes them all.
    const started = JSON.parse((await request(agent, port, 'POST', '/api/channels/webhook/link', headers, '{}')).body);
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    const getHeaders = { authorization: headers.authorization, 'x-tenant-id': tenantId };
    // The waiters are a child process's (link-waiters.ts): the api answers them, the bench's clock times them.
    const { answered } = await startLinkWaiters({
      port,
      path: '/api/channels/webhook/link/wait?timeout=60',
      headers: getHeaders,
      waiters,
      databaseUrl: ctx.url,
      channel: 'channel_link_events',
    });
    while (app.channelWaiters.size() < waiters) await sleep(20);
    // Each waiter reads the link once it waits: a query queued behind those
    // reads (the pool serves in order) returns once all of them are done, so
    // the clock starts with every waiter settled, as after a real arrival.
    await app.db.query(sql.unsafe`select 1`);
    global.gc?.();
    const rssAdded = process.memoryUsage().rss - rssBefore;
    for (const k of Object.keys(marks)) delete marks[k];
    const sent = performance.timeOrigin + performance.now();
    let boundAt = 0;
    const { answers, notifiedAt } = await profiled('link-wait', async () => {
      await inbound({ id: 'bind', from: { id: 'bench-conversation' }, sessionToken: started.sessionToken });
      boundAt = performance.timeOrigin + performance.now();
      return answered;
    });
    if (answers.some((a) => a.status !== 200))
      throw new Error(`channels: link/wait answered ${answers.find((a) => a.status !== 200)!.status}`);
    const woken = answers.map((a) => a.at - sent);
    if (notifiedAt === null) throw new Error('channels: the binding was never announced');
    const afterCommit = answers.map((a) => a.at - notifiedAt);
    if (process.env.BENCH_DEBUG) {
      const after = Object.entries(marks)
        .map(([k, at]) => `${k} ${(at - sent).toFixed(1)} ms`)
        .join(', ');
      process.stderr.write(
        `${after}; inbound answered after ${(boundAt - sent).toFixed(1)} ms; first waiter ${Math.min(...woken).toFixed(1)} ms, last ${Math.max(...woken).toFixed(1)} ms\n`,
      );
    }
    await request(agent, port, 'POST', '/api/channels/webhook/enable', headers, '{}');

    // Accepted/s: unique signed messages of the bound conversation, each a turn enqueued (no worker runs them).
    let n = 0;
    let failures = 0;
    const accepted = await throughput(32, ctx.seconds, async () => {
      const answer = await inbound({ id: `m-${++n}`, from: { id: 'bench-conversation' }, text: `message ${n}` });
      if (answer.status !== 200 || !answer.body.includes('"turn"')) failures++;
    });
    if (failures > 0) throw new Error(`${failures} inbound messages were not accepted as turns`);
    return {
      acceptedPerSecond: accepted.perSecond,
      waiters,
      rssAddedMb: rssAdded / 1024 / 1024,
      wakeP50: percentile(woken, 50),
      wakeP99: percentile(woken, 99),
      afterCommitP99: percentile(afterCommit, 99),
    };
  } finally {
    agent.destroy();
    await app.close();
    await hub.stop();
  }
}
