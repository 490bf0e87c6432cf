// Reference runner: enrolls nothing itself (a tenant Admin enrolls it and
// hands over the token), then heartbeats every few seconds reporting its
// cloud gateway as connected and acknowledges the restore work it is given.
//   node --import tsx ops/runner.ts --url http://localhost:3000 --token <runner token>
// The token may come from RUNNER_TOKEN instead of the command line (keeps it
// out of process listings). Stops cleanly on SIGINT/SIGTERM.
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createLogger } from '../core/logger.ts';

const logger = createLogger(process.env.LOG_LEVEL ?? 'info', 'runner');

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.RUNNER_URL ?? 'http://localhost:3000' },
    token: { type: 'string' },
    interval: { type: 'string', default: process.env.RUNNER_INTERVAL_MS ?? '3000' },
  },
  strict: true,
});
const token = values.token ?? process.env.RUNNER_TOKEN;
const intervalMs = Number(values.interval);
if (!token || !z.url().safeParse(values.url).success || !Number.isInteger(intervalMs) || intervalMs < 100) {
  logger.error('usage: node --import tsx ops/runner.ts --url <base url> --token <runner token> [--interval <ms, at least 100>] (or RUNNER_TOKEN)');
  process.exit(2);
}
const base = values.url!.replace(/\/+$/, '');

const Heartbeat = z.object({
  pendingWork: z.array(z.object({ id: z.string(), kind: z.string(), managedAgentId: z.string(), agentName: z.string(), jobId: z.string() })),
});

const stop = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'stopping');
    stop.abort();
  });
}

async function call(path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.any([stop.signal, AbortSignal.timeout(10_000)]),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

logger.info({ url: base, intervalMs }, 'runner started');
while (!stop.signal.aborted) {
  try {
    const { pendingWork } = Heartbeat.parse(await call('/api/runners/heartbeat', { gatewayConnected: true }));
    logger.debug({ pending: pendingWork.length }, 'heartbeat sent');
    for (const work of pendingWork) {
      if (work.kind !== 'agent.restore') {
        logger.warn({ workId: work.id, kind: work.kind }, 'unknown kind of work; leaving it pending');
        continue;
      }
      // A real runner would start the agent here; the reference one only
      // takes it over and acknowledges.
      await call(`/api/runners/work/${work.id}/ack`, {});
      logger.info({ workId: work.id, managedAgentId: work.managedAgentId, agent: work.agentName, jobId: work.jobId }, 'restore acknowledged');
    }
  } catch (error) {
    if (stop.signal.aborted) break;
    // A failed heartbeat is retried on the next tick; the service marks the
    // runner offline only after a minute without one.
    logger.warn({ err: error }, 'heartbeat failed; retrying');
  }
  await sleep(intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
}
logger.info('runner stopped');
