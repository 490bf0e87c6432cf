// Reference runner: enrolls nothing itself (a tenant Admin enrolls it and
// hands over the token), then heartbeats every few seconds reporting its
// cloud gateway as connected and acknowledges the restore work it is given.
//   node --import tsx ops/runner.ts --url http://localhost:3000 --token <runner token>
// The token may come from RUNNER_TOKEN instead of the command line (keeps it
// out of process listings). Stops cleanly on SIGINT/SIGTERM.
// Failures back off exponentially (capped at a minute); a token the service
// refuses (401: revoked or wrong) stops the runner after --max-refusals
// refusals in a row (default 10), exit code 1: enroll again for a new token.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { commandLogger } from './command-logger.ts';
import { commandLine, usageError } from '../core/process/command-line.ts';

const logger = commandLogger('runner', 'info');

const USAGE = `
usage: npm run runner -- --url <base url> --token <runner token> [--interval <ms, at least 100>] [--max-refusals <n, at least 1>]
A reference runner: heartbeats with the service and acknowledges the restore
work it is given. The token may come from RUNNER_TOKEN instead (out of
process listings); RUNNER_URL, RUNNER_INTERVAL_MS and RUNNER_MAX_REFUSALS
set the others.`;
const values = commandLine(USAGE, {
  url: { type: 'string', default: process.env.RUNNER_URL ?? 'http://localhost:3000' },
  token: { type: 'string' },
  interval: { type: 'string', default: process.env.RUNNER_INTERVAL_MS ?? '3000' },
  'max-refusals': { type: 'string', default: process.env.RUNNER_MAX_REFUSALS ?? '10' },
});
const token = (values.token as string | undefined) ?? process.env.RUNNER_TOKEN;
const intervalMs = Number(values.interval);
const maxRefusals = Number(values['max-refusals']);
const MAX_BACKOFF_MS = 60_000;
if (!token) usageError(USAGE, 'a runner token is needed: --token, or RUNNER_TOKEN');
if (!z.url().safeParse(values.url).success) usageError(USAGE, "--url must be the service's base URL");
if (!Number.isInteger(intervalMs) || intervalMs < 100)
  usageError(USAGE, '--interval must be a whole number of milliseconds, at least 100');
if (!Number.isInteger(maxRefusals) || maxRefusals < 1)
  usageError(USAGE, '--max-refusals must be a whole number, at least 1');
const base = (values.url as string).replace(/\/+$/, '');

const Heartbeat = z.object({
  pendingWork: z.array(
    z.object({
      id: z.string(),
      kind: z.string(),
      managedAgentId: z.string(),
      agentName: z.string(),
      jobId: z.string(),
    }),
  ),
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
  if (res.status === 401) throw new TokenRefused(`${path} answered 401: ${text.slice(0, 200)}`);
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

class TokenRefused extends Error {}

logger.info({ url: base, intervalMs, maxRefusals }, 'runner started');
let failures = 0;
let refusals = 0;
let exitCode = 0;
while (!stop.signal.aborted) {
  try {
    const { pendingWork } = Heartbeat.parse(await call('/api/runners/heartbeat', { gatewayConnected: true }));
    failures = 0;
    refusals = 0;
    logger.debug({ pending: pendingWork.length }, 'heartbeat sent');
    for (const work of pendingWork) {
      if (work.kind !== 'agent.restore') {
        logger.warn({ workId: work.id, kind: work.kind }, 'unknown kind of work; leaving it pending');
        continue;
      }
      // A real runner would start the agent here; the reference one only
      // takes it over and acknowledges.
      await call(`/api/runners/work/${work.id}/ack`, {});
      logger.info(
        { workId: work.id, managedAgentId: work.managedAgentId, agent: work.agentName, jobId: work.jobId },
        'restore acknowledged',
      );
    }
  } catch (error) {
    if (stop.signal.aborted) break;
    failures++;
    refusals = error instanceof TokenRefused ? refusals + 1 : 0;
    if (refusals >= maxRefusals) {
      logger.error(
        { refusals },
        `the runner token was refused ${refusals} times in a row (revoked or wrong): enroll the runner again and restart it with the new token`,
      );
      exitCode = 1;
      break;
    }
    // The service marks the runner offline only after a minute without a heartbeat.
    const retryInMs = Math.min(MAX_BACKOFF_MS, intervalMs * 2 ** (failures - 1));
    logger.warn({ err: error, failures, retryInMs }, 'heartbeat failed; retrying');
    await sleep(retryInMs, undefined, { signal: stop.signal }).catch(() => undefined);
    continue;
  }
  await sleep(intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
}
logger.info('runner stopped');
process.exitCode = exitCode;
