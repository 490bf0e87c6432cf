// Job finished -> websocket message received: the api listens, a client is
// subscribed to `samples` queued jobs, and each job is finished in turn; the
// clock runs from the finishing commit's return to the message's arrival.
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { buildApp } from '../../api/app.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { sql } from '../../core/db/pool.ts';
import { enqueueJobs } from '../../core/jobs/enqueue.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { completeJob, markRunning } from '../../core/jobs/lifecycle.ts';
import { sleep } from './measure.ts';
import { summarize, type BenchContext, type Latencies } from './scenarios.ts';

export async function websocketLatency(ctx: BenchContext, config: Config, samples: number): Promise<Latencies> {
  const { db } = ctx;
  const hub = new JobEventHub(ctx.url, db, ctx.logger);
  await hub.start();
  const app = await buildApp({ config, db, jobEvents: hub, jobs: new GroupCommitter(db) });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const userId = randomUUID();
  await db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@bench.test`})`);
  await db.query(
    sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${ctx.tenantId}, ${userId}, 'admin')`,
  );
  const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.baseUrl);

  const jobs = await db.transaction((tx) =>
    enqueueJobs(
      tx,
      Array.from({ length: samples }, () => ({ kind: 'bench.idle', tenantId: ctx.tenantId })),
    ),
  );
  // Running, as a worker would have them, so the finishing update is the real one.
  for (const job of jobs) await markRunning(db, job.id, 1, { lockedBy: 'bench', lockedAt: null });
  const socket = new WebSocket(`${base.replace('http', 'ws')}/api/ws`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const arrivals = new Map<string, (at: number) => void>();
  let snapshots = 0;
  let allSubscribed!: () => void;
  const subscribed = new Promise<void>((r) => (allSubscribed = r));
  socket.on('message', (data) => {
    const at = performance.now();
    const message = JSON.parse(String(data)) as { type: string; job?: { id: string; status: string } };
    if (message.type !== 'job' || !message.job) return;
    if (message.job.status === 'running' && ++snapshots === samples) allSubscribed();
    if (message.job.status === 'succeeded') arrivals.get(message.job.id)?.(at);
  });
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  for (const job of jobs) socket.send(JSON.stringify({ type: 'subscribe', jobId: job.id }));
  await subscribed;

  const results: number[] = [];
  for (const job of jobs) {
    const arrived = new Promise<number>((resolve) => arrivals.set(job.id, resolve));
    // The clock starts as the finishing update is sent: the message can
    // arrive before the commit's reply is processed in this same process.
    const sent = performance.now();
    await completeJob(db, job.id, 1, { ok: true });
    results.push((await arrived) - sent);
    await sleep(2);
  }
  socket.close();
  await app.close();
  await hub.stop();
  return summarize(results);
}
