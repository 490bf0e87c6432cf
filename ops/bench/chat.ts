// Chat figures: POST /api/chat/send accepted/s over real HTTP (each 202 is a
// committed message + job; the clients run in a child process), and send ->
// first progress -> final websocket message with the built-in model
// answering at once.
import http from 'node:http';
import WebSocket from 'ws';
import { buildApp } from '../../api/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { turnQueue } from '../../core/chat/send.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { startWorker } from '../../workers/worker.ts';
import { chatSendLoad } from './chat-load.ts';
import { cpuDuring, type CpuUse } from './cpu.ts';
import { postJson, profiled, sleep, throughput } from './measure.ts';
import { rawInserts, summarize, truncateQueues, type BenchContext, type Latencies } from './scenarios.ts';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

const post = (port: number, path: string, headers: Record<string, string>, body: string) =>
  postJson(agent, port, path, headers, body);

/** Where the time from a send to its final websocket message goes, per part. */
export type ChatBreakdown = { accepted: Latencies; pickedUp: Latencies; ran: Latencies; delivered: Latencies };
export type ChatFigures = {
  acceptedPerSecond: number;
  acceptedPerSecondManySessions: number;
  /**
   * Raw inserts (32 connections) measured just before and just after each
   * send phase: a shared machine's speed drifts over seconds to minutes, and
   * the mean of the two follows a steady drift through the phase.
   */
  rawAround: { oneSession: { before: number; after: number }; manySessions: { before: number; after: number } };
  /** CPU per operation (µs) in the 32-session phase and in the raw inserts just before it. */
  cpu: { send: CpuPerOp; rawInsert: CpuPerOp };
  firstProgress: Latencies;
  final: Latencies;
  /** Second of two sends in a row in one session: its final message after the first's. */
  followUp: Latencies;
  parts: ChatBreakdown;
};

/** µs of CPU per operation: this process's (the api, or the raw inserts' client) and PostgreSQL's. */
export type CpuPerOp = { process: number; postgres: number | null };
const perOp = (cpu: CpuUse, ops: number): CpuPerOp => ({
  process: (cpu.processSeconds * 1e6) / ops,
  postgres: cpu.postgresSeconds === null ? null : (cpu.postgresSeconds * 1e6) / ops,
});

export async function chatFigures(ctx: BenchContext, config: Config, samples: number): Promise<ChatFigures> {
  const quiet = { ...config, logLevel: 'warn' };
  const hub = new JobEventHub(ctx.url, ctx.db, ctx.logger);
  await hub.start();
  const app = await buildApp({ config: quiet, db: ctx.db, jobEvents: hub, jobs: new GroupCommitter(ctx.db) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;

  const userId = (await ctx.db.oneFirst(
    sql.unsafe`insert into users (email) values ('chat-bench@bench.test') returning id`,
  )) as string;
  await ctx.db.query(sql.unsafe`update tenants set plan = 'enterprise' where id = ${ctx.tenantId}`);
  await ctx.db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${ctx.tenantId}, ${userId}, 'admin')`,
  );
  const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.baseUrl);
  const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': ctx.tenantId };
  const newSession = async () =>
    (JSON.parse((await post(port, '/api/chat/sessions', headers, '{}')).body) as { id: string }).id;
  const session = await newSession();
  let n = 0;
  const sendOnce = async (sessionId = session) => {
    const res = await post(
      port,
      '/api/chat/send',
      { ...headers, 'idempotency-key': `bench-${process.pid}-${++n}` },
      JSON.stringify({ sessionId, message: `message ${n}` }),
    );
    if (res.status !== 202) throw new Error(`send answered ${res.status}: ${res.body}`);
    return JSON.parse(res.body) as { jobId: string };
  };

  try {
    // Accepted/s with no worker running: the api and PostgreSQL only, the
    // clients in a process of their own (chat-load.ts).
    await throughput(8, 1, async () => void (await sendOnce())); // warm-up
    const load = { ports: [port], token, tenantId: ctx.tenantId, seconds: ctx.seconds, connections: 32 };
    // And the measured load itself once, not counted: right after start the
    // api still runs cold (V8 optimizes as it goes): a first phase costs the
    // api about 1.3x the CPU per send of the phase after it, and a third
    // about 0.9x the second's (measured).
    await chatSendLoad({ ...load, sessions: [session], keyPrefix: `bench-${process.pid}-warm` });
    // 32 clients in one session: every send queues on the same Graphile queue row.
    const rawOne = await rawInserts(ctx, 32);
    const accepted = await chatSendLoad({ ...load, sessions: [session], keyPrefix: `bench-${process.pid}-one` });
    const rawOneAfter = await rawInserts(ctx, 32);
    // 32 clients, each in its own session (one conversation per person, as real traffic is).
    const sessions = await Promise.all(Array.from({ length: 32 }, newSession));
    const { result: rawMany, cpu: rawCpu } = await cpuDuring(ctx.db, () => rawInserts(ctx, 32));
    const { result: perSession, cpu: sendCpu } = await cpuDuring(ctx.db, () =>
      profiled('chat-send', () => chatSendLoad({ ...load, sessions, keyPrefix: `bench-${process.pid}-many` })),
    );
    const rawManyAfter = await rawInserts(ctx, 32);
    await truncateQueues(ctx.db);

    const worker = await startWorker({ config: quiet, databaseUrl: ctx.url, logger: ctx.logger, concurrency: 4 });
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/ws`, {
      headers: { authorization: headers.authorization },
    });
    const waiting = new Map<string, { progress?: number; resolve: (final: number) => void }>();
    socket.on('message', (data) => {
      const at = performance.now();
      const m = JSON.parse(String(data)) as {
        type: string;
        job?: { id: string; status: string; progress: unknown };
        deltas?: Array<{ jobId: string }>;
      };
      // The first piece of the answer: a stream delta (or a progress write).
      for (const d of m.deltas ?? []) {
        const w = waiting.get(d.jobId);
        if (w && w.progress === undefined) w.progress = at;
      }
      const w = m.job && waiting.get(m.job.id);
      if (!w || !m.job) return;
      if (m.job.progress && w.progress === undefined) w.progress = at;
      if (m.job.status === 'succeeded' || m.job.status === 'failed') w.resolve(at);
    });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    // The worker runs in this process: its events time the pickup and the end of the task (after its final commit).
    // A turn's Graphile job is its session queue's wake-up: the samples go one at a time, so it stands for the turn.
    const marks = new Map<string, { start?: number; success?: number }>();
    const mark =
      (what: 'start' | 'success') =>
      ({ job }: { job: { payload: unknown } }) => {
        const id = (job.payload as { queue?: string } | null)?.queue;
        if (id) marks.set(id, { ...marks.get(id), [what]: performance.now() });
      };
    worker.events.on('job:start', mark('start'));
    worker.events.on('job:success', mark('success'));
    const firsts: number[] = [];
    const finals: number[] = [];
    const parts = {
      accepted: [] as number[],
      pickedUp: [] as number[],
      ran: [] as number[],
      delivered: [] as number[],
    };
    /** Subscribes to a job; resolves with the time its final message arrived. */
    const follow = (jobId: string) => {
      const entry: { progress?: number; resolve: (final: number) => void } = { resolve: () => undefined };
      const final = new Promise<number>((resolve) => (entry.resolve = resolve));
      waiting.set(jobId, entry);
      socket.send(JSON.stringify({ type: 'subscribe', jobId }));
      return { entry, final };
    };
    for (let i = 0; i < samples; i++) {
      const sent = performance.now();
      const { jobId } = await sendOnce();
      const accepted = performance.now();
      const { entry, final } = follow(jobId);
      const done = await final;
      finals.push(done - sent);
      const m = marks.get(turnQueue(session));
      if (m?.start !== undefined && m.success !== undefined) {
        parts.accepted.push(accepted - sent);
        parts.pickedUp.push(m.start - accepted); // negative when the worker had it before the 202 was read
        parts.ran.push(m.success - m.start);
        parts.delivered.push(done - m.success); // negative when the message came before the worker heard its commit
      }
      marks.delete(turnQueue(session));
      if (entry.progress !== undefined) firsts.push(entry.progress - sent);
      waiting.delete(jobId);
      await sleep(2);
    }
    // Two sends in a row in one session: the second waits in the session's
    // queue while the first runs, and starts when the first ends (its end
    // wakes the queue: queue_wake, migration 0043), not at the worker's next poll.
    const followUps: number[] = [];
    for (let i = 0; i < Math.min(samples, 100); i++) {
      const first = follow((await sendOnce()).jobId);
      const second = follow((await sendOnce()).jobId);
      const [firstDone, secondDone] = await Promise.all([first.final, second.final]);
      followUps.push(secondDone - firstDone);
      await sleep(2);
    }
    waiting.clear();
    socket.close();
    await worker.stop();
    const breakdown = {
      accepted: summarize(parts.accepted),
      pickedUp: summarize(parts.pickedUp),
      ran: summarize(parts.ran),
      delivered: summarize(parts.delivered),
    };
    return {
      acceptedPerSecond: accepted.perSecond,
      acceptedPerSecondManySessions: perSession.perSecond,
      rawAround: {
        oneSession: { before: rawOne.perSecond, after: rawOneAfter.perSecond },
        manySessions: { before: rawMany.perSecond, after: rawManyAfter.perSecond },
      },
      cpu: { send: perOp(sendCpu, perSession.ops), rawInsert: perOp(rawCpu, rawMany.ops) },
      firstProgress: summarize(firsts),
      final: summarize(finals),
      followUp: summarize(followUps),
      parts: breakdown,
    };
  } finally {
    await app.close();
    await hub.stop();
  }
}
