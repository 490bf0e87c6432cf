// Long streaming turns at scale: TURNS chat turns at once, each a model
// stream of 20 tokens a second for 10 s from a local provider in its own
// process (stream-provider.ts), run by ONE worker process (a child, started
// as `npm run start:worker` does, so its CPU and memory are its own). The
// api is a child process too; the bench process is the client: it sends the
// turns over HTTP and one websocket follows every turn. A second api process,
// which no socket follows, hears the same job events and deltas.
//   - concurrent turns: the most streams the provider had open at once;
//   - delta -> websocket: each token carries the time the provider wrote it;
//     the client reads the time it arrived;
//   - worker CPU (cores) and resident memory while all turns stream;
//   - api CPU (cores), of the api that follows them and of the one that does not;
//   - writes of each turn's job row (progress is coalesced: bounded per turn).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { z } from 'zod';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { sql } from '../../core/db/pool.ts';
import { putKey } from '../../core/provider-keys/keys.ts';
import { freePort } from '../embedded-postgres.ts';
import { postJson, sleep } from './measure.ts';
import { spawnEntry, stopAll, waitForHealth } from './processes.ts';
import { summarize, type BenchContext, type Latencies } from './scenarios.ts';

export type StreamingFigures = {
  turns: number;
  concurrent: number;
  deltaLatency: Latencies;
  workerCores: number;
  workerRssMb: number;
  apiCores: number;
  /** The api that no socket follows: what every other replica pays for these streams. */
  idleApiCores: number;
  rowWritesPerTurn: number;
  deltasPerSecond: number;
};

const TICKS_PER_SECOND = 100;
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}
function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.replace(/\D+/g, '')) / 1024;
}

function providerStats(port: number): Promise<{ open: number; maxOpen: number; finished: number }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/stats', agent: false }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve(JSON.parse(body)));
      })
      .on('error', reject);
  });
}

export async function streamingFigures(
  ctx: BenchContext,
  config: Config,
  env: Record<string, string>,
  turns: number,
): Promise<StreamingFigures> {
  const provider = spawnEntry('stream provider', 'ops/bench/stream-provider.ts', {
    STREAM_TOKENS_PER_S: '20',
    STREAM_SECONDS: '10',
  });
  await provider.logged('listening');
  const providerPort = Number(/"port":(\d+)/.exec(provider.tail())![1]);
  const worker = spawnEntry('worker', 'workers/runner.ts', {
    ...env,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    OPENAI_BASE_URL: `http://127.0.0.1:${providerPort}/v1`,
    WORKER_IO_CONCURRENCY: String(turns + 100),
  });
  const port = await freePort();
  const api = spawnEntry('api', 'api/server.ts', {
    ...env,
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    PORT: String(port),
    HOST: '127.0.0.1',
    BASE_URL: config.baseUrl,
    WS_MAX_SUBSCRIPTIONS: String(turns + 10),
  });
  const idlePort = await freePort();
  const idleApi = spawnEntry('idle api', 'api/server.ts', {
    ...env,
    LOG_LEVEL: 'warn',
    LOG_FORMAT: 'json',
    PORT: String(idlePort),
    HOST: '127.0.0.1',
    BASE_URL: config.baseUrl,
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  try {
    await worker.logged('worker started');
    await waitForHealth(api, port);
    await waitForHealth(idleApi, idlePort);
    const tenantId = (await ctx.db.oneFirst(
      sql.unsafe`insert into tenants (name, plan) values ('bench streaming', 'enterprise') returning id`,
    )) as string;
    const userId = randomUUID();
    await ctx.db.query(sql.unsafe`insert into users (id, email) values (${userId}, ${`${userId}@bench.test`})`);
    await ctx.db.query(
      sql.unsafe`insert into tenant_memberships (tenant_id, user_id, role) values (${tenantId}, ${userId}, 'admin')`,
    );
    await putKey(ctx.db, Keyring.fromConfig(config), {
      tenantId,
      provider: 'openai',
      apiKey: 'sk-bench-streaming-key',
      userId,
    });
    const sessions = await ctx.db.anyFirst(sql.type(z.object({ id: z.string() }))`
      insert into chat_sessions (tenant_id, title, model, created_by)
      select ${tenantId}, 'stream ' || n, 'openai/gpt-4o-mini', ${userId} from generate_series(1, ${turns}) n returning id`);
    const token = await signPlatformToken({ userId }, config.secrets.PLATFORM_JWT_SECRET, config.baseUrl);
    const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenantId };

    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/ws`, {
      headers: { authorization: headers.authorization },
    });
    const latencies: number[] = [];
    let deltas = 0;
    let measuring = false;
    const finals = new Set<string>();
    socket.on('message', (data) => {
      const now = Date.now();
      const m = JSON.parse(String(data)) as {
        type: string;
        deltas?: Array<{ text: string; offset: number }>;
        job?: { id: string; status: string };
      };
      if (m.type === 'deltas') {
        for (const d of m.deltas!) {
          deltas++;
          // A late subscriber's first delta is the text so far: only live tokens are timed.
          if (!measuring || d.offset === 0) continue;
          for (const stamp of d.text.matchAll(/t(\d+) /g)) latencies.push(now - Number(stamp[1]));
        }
      } else if (m.type === 'job' && ['succeeded', 'failed'].includes(m.job!.status)) finals.add(m.job!.id);
    });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));

    const jobIds: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < sessions.length) {
          const sessionId = sessions[next++]!;
          const res = await postJson(
            agent,
            port,
            '/api/chat/send',
            { ...headers, 'idempotency-key': `stream-${sessionId}` },
            JSON.stringify({ sessionId, message: 'Stream, please.' }),
          );
          if (res.status !== 202) throw new Error(`send answered ${res.status}: ${res.body}`);
          const { jobId } = JSON.parse(res.body) as { jobId: string };
          jobIds.push(jobId);
          socket.send(JSON.stringify({ type: 'subscribe', jobId }));
        }
      }),
    );
    // Every turn streaming at once: measure the worker for a few seconds.
    const allOpen = performance.now();
    for (;;) {
      const s = await providerStats(providerPort);
      if (s.open >= turns || s.finished > 0) break;
      if (performance.now() - allOpen > 60_000)
        throw new Error(`only ${s.open} of ${turns} streams opened within 60 s`);
      await sleep(100);
    }
    const pid = worker.child.pid!;
    await sleep(1_000);
    measuring = true;
    const cpu0 = cpuSeconds(pid);
    const apiCpu0 = cpuSeconds(api.child.pid!);
    const idleCpu0 = cpuSeconds(idleApi.child.pid!);
    const t0 = performance.now();
    const deltas0 = deltas;
    await sleep(4_000);
    const cores = (cpuSeconds(pid) - cpu0) / ((performance.now() - t0) / 1000);
    const apiCores = (cpuSeconds(api.child.pid!) - apiCpu0) / ((performance.now() - t0) / 1000);
    const idleApiCores = (cpuSeconds(idleApi.child.pid!) - idleCpu0) / ((performance.now() - t0) / 1000);
    const deltasPerSecond = (deltas - deltas0) / ((performance.now() - t0) / 1000);
    const rss = rssMb(pid);
    measuring = false;
    const stats = await providerStats(providerPort);
    const deadline = performance.now() + 120_000;
    while (finals.size < turns && performance.now() < deadline) await sleep(200);
    socket.close();
    const writes = await ctx.db.oneFirst(sql.type(z.object({ v: z.number() }))`
      select coalesce(avg(version), 0)::float8 as v from jobs where id = any(${sql.array(jobIds, 'uuid')})`);
    return {
      turns,
      concurrent: stats.maxOpen,
      deltaLatency: summarize(latencies),
      workerCores: cores,
      workerRssMb: rss,
      apiCores,
      idleApiCores,
      rowWritesPerTurn: writes,
      deltasPerSecond,
    };
  } finally {
    await stopAll([worker, api, idleApi, provider]);
    agent.destroy();
  }
}
