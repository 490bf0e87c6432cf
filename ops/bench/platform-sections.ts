// The bench's sections past the job queue (fairness, streaming, websocket, chat, http, billing, channels,
// scale-out, runtime, the scale model): each measures its figures and adds them to the report.
import { billingFigures } from './billing.ts';
import { channelFigures } from './channels.ts';
import { chatFigures } from './chat.ts';
import { fairnessFigures } from './fairness.ts';
import { httpFigures } from './http.ts';
import { startFigures } from './runtime.ts';
import { SCALE_FIGURES, scaleFigures, seedScale } from './scale.ts';
import { scaleOutFigures } from './scale-out.ts';
import { rawNotifyLatency, resetQueues, type BenchRun } from './scenarios.ts';
import { streamingFigures } from './streaming.ts';
import { websocketLatency } from './websocket.ts';

export async function fairnessSection({ ctx, benchEnv, report }: BenchRun): Promise<void> {
  // (d2) A noisy account floods the I/O pool from 4 workspaces; a quiet account's jobs start at the next free slot.
  const fair = await fairnessFigures(ctx, benchEnv);
  for (const p of ['p50', 'p99'] as const) {
    report.add(
      `quiet tenant start behind a noisy account (4 workspaces), ${p}`,
      fair.fair[p],
      'ms',
      { name: `first come first served ${p}`, value: fair.fifo[p] },
      p === 'p99' ? '<= 100 ms' : undefined,
    );
  }
}

export async function streamingSection({ ctx, config, benchEnv, report }: BenchRun, streamTurns: number) {
  // (d3) Long streaming turns: one worker process holding them all.
  await resetQueues(ctx);
  const s = await streamingFigures(ctx, config, benchEnv, streamTurns);
  report.add('concurrent streaming turns per worker process', s.concurrent, 'turns', 'none', '>= 1,000');
  report.add(`stream delta -> websocket p50 (${s.turns.toLocaleString('en')} turns)`, s.deltaLatency.p50, 'ms', 'none');
  report.add(
    `stream delta -> websocket p99 (${s.turns.toLocaleString('en')} turns)`,
    s.deltaLatency.p99,
    'ms',
    'none',
    '<= 50 ms',
  );
  report.add(
    `worker CPU cores at ${s.turns.toLocaleString('en')} streaming turns`,
    s.workerCores,
    'cores',
    'none',
    '<= 0.5',
  );
  report.add(
    `worker resident memory at ${s.turns.toLocaleString('en')} streaming turns`,
    s.workerRssMb,
    'MB',
    'none',
    '<= 1,536 MB',
  );
  report.add('stream deltas received/s over the websocket', s.deltasPerSecond, 'deltas/s', 'none');
  report.add(
    `api CPU cores at ${s.turns.toLocaleString('en')} streaming turns (one websocket follows all)`,
    s.apiCores,
    'cores',
    'none',
  );
  report.add(
    `api CPU cores while ${s.turns.toLocaleString('en')} turns stream that none of its sockets follow`,
    s.idleApiCores,
    'cores',
    'none',
    '<= 0.05',
  );
  report.add('job row writes per 10-s streaming turn', s.rowWritesPerTurn, 'writes', 'none');
}

export async function websocketSection({ ctx, config, report, samples }: BenchRun): Promise<void> {
  // (e) job finished -> websocket message; baseline: raw NOTIFY -> LISTEN.
  const notify = await rawNotifyLatency(ctx, samples);
  const ws = await websocketLatency(ctx, config, samples);
  report.add('job finished -> websocket p50', ws.p50, 'ms', { name: 'NOTIFY p50', value: notify.p50 });
  report.add('job finished -> websocket p99', ws.p99, 'ms', { name: 'NOTIFY p99', value: notify.p99 }, '<= 25 ms');
}

export async function chatSection({ ctx, config, report, samples }: BenchRun): Promise<void> {
  // (f) Chat: sends accepted over HTTP, and send -> first progress -> final.
  await resetQueues(ctx);
  const chat = await chatFigures(ctx, config, Math.min(samples, 200));
  // Each send phase against raw inserts measured just before and after it (the start-of-run figure is minutes old by then).
  for (const [phase, which, sends, raw] of [
    ['1 session', '1-session', chat.acceptedPerSecond, chat.rawAround.oneSession],
    ['32 sessions', '32-session', chat.acceptedPerSecondManySessions, chat.rawAround.manySessions],
  ] as const) {
    report.add(`raw insert/s, 32 connections, just before the ${which} sends`, raw.before, 'ops/s');
    report.add(`raw insert/s, 32 connections, just after the ${which} sends`, raw.after, 'ops/s');
    report.add(
      `chat sends accepted/s (HTTP, 32 clients, ${phase})`,
      sends,
      'req/s',
      { name: 'raw 32c mean around', value: (raw.before + raw.after) / 2 },
      '>= 0.40x',
    );
  }
  // CPU per send in the 32-session phase (the api runs in this process); per raw insert just before it.
  report.add('CPU per raw insert: PostgreSQL server', chat.cpu.rawInsert.postgres ?? Number.NaN, 'µs');
  report.add('CPU per raw insert: client (bench process)', chat.cpu.rawInsert.process, 'µs');
  report.add(
    'CPU per chat send (32 sessions): PostgreSQL server',
    chat.cpu.send.postgres ?? Number.NaN,
    'µs',
    chat.cpu.rawInsert.postgres === null ? undefined : { name: 'per raw insert', value: chat.cpu.rawInsert.postgres },
  );
  report.add('CPU per chat send (32 sessions): api process', chat.cpu.send.process, 'µs');
  report.add('chat send -> first progress p50', chat.firstProgress.p50, 'ms');
  report.add('chat send -> final websocket p50', chat.final.p50, 'ms', undefined, '< 20 ms');
  report.add('chat send -> final websocket p99', chat.final.p99, 'ms', undefined, '<= 40 ms');
  report.add('chat follow-up in a session: first final -> second final p50', chat.followUp.p50, 'ms');
  report.add('chat follow-up in a session: first final -> second final p99', chat.followUp.p99, 'ms');
  // Where that time goes: 202 received, worker pickup, the task (to its final commit), NOTIFY to the socket.
  for (const [part, name] of [
    ['accepted', 'send -> 202'],
    ['pickedUp', '202 -> worker pickup'],
    ['ran', 'pickup -> task done'],
    ['delivered', 'task done -> final websocket'],
  ] as const) {
    report.add(`chat part: ${name} p50`, chat.parts[part].p50, 'ms');
    report.add(`chat part: ${name} p99`, chat.parts[part].p99, 'ms');
  }
}

export async function httpSection({ ctx, config, report }: BenchRun): Promise<void> {
  // (g) HTTP: token exchanges and authenticated Agent API reads vs a bare route.
  const web = await httpFigures(ctx, config);
  const bareBase = { name: 'bare fastify route', value: web.bare };
  report.add('bare fastify GET (16 connections)', web.bare, 'req/s');
  report.add('token exchanges (JWT-bearer grant)', web.exchanges, 'req/s', bareBase);
  report.add('authenticated GET /api/agent/v1/me', web.me, 'req/s', bareBase, '>= 0.40x');
  report.add('MCP tools/call getAgentMe (same operation at /mcp)', web.mcp, 'req/s', {
    name: 'GET /api/agent/v1/me',
    value: web.me,
  });
}

export async function billingSection({ ctx, benchEnv, report, samples, rawBase }: BenchRun): Promise<void> {
  // (h) Stripe webhooks: accepted/s over HTTP, and event received -> plan changed.
  await resetQueues(ctx);
  const billing = await billingFigures(ctx, benchEnv, Math.min(samples, 100));
  report.add(
    'stripe webhook events accepted/s (signature, stored, job; 32 clients)',
    billing.acceptedPerSecond,
    'req/s',
    rawBase,
  );
  report.add('webhook received -> plan changed p50', billing.planChanged.p50, 'ms');
  report.add('webhook received -> plan changed p99', billing.planChanged.p99, 'ms');
}

export async function channelsSection({ ctx, config, report, rawBase }: BenchRun): Promise<void> {
  // (i) Channels: signed inbound messages accepted/s; 1,000 link/wait waiters woken by one link.
  await resetQueues(ctx);
  const ch = await channelFigures(ctx, config);
  report.add(
    'channel inbound messages accepted/s (signature, stored, turn enqueued; 32 clients)',
    ch.acceptedPerSecond,
    'req/s',
    rawBase,
  );
  report.add(`link/wait: resident memory added by ${ch.waiters} waiters`, ch.rssAddedMb, 'MB');
  report.add(`link/wait: ${ch.waiters} waiters answered after the link, p50`, ch.wakeP50, 'ms');
  report.add(`link/wait: ${ch.waiters} waiters answered after the link, p99`, ch.wakeP99, 'ms');
  report.add(
    `link/wait: ${ch.waiters} waiters answered after the binding committed (its NOTIFY), p99`,
    ch.afterCommitP99,
    'ms',
    'none',
    '<= 50 ms',
  );
}

export async function scaleOutSection({ ctx, benchEnv, report }: BenchRun): Promise<void> {
  // (j) The entries as separate processes on this PostgreSQL: on 2 cores the cost of more processes, not a speed-up.
  const scale = await scaleOutFigures(ctx, benchEnv);
  report.add('scale-out: no-op jobs/s, 2 worker processes (8 each)', scale.jobs.two, 'jobs/s', {
    name: '1 worker process',
    value: scale.jobs.one,
  });
  report.add('scale-out: chat sends/s, 2 api processes (32 clients)', scale.sends.two, 'req/s', {
    name: '1 api process',
    value: scale.sends.one,
  });
}

export async function runtimeSection({ benchEnv, report }: BenchRun): Promise<void> {
  // (l) Process start: the api through tsx (the npm scripts) and compiled (npm run build, production).
  const starts = await startFigures(benchEnv);
  report.add('process start: api compiled, spawn to ready', starts.compiled.seconds, 's', {
    name: 'through tsx',
    value: starts.tsx.seconds,
  });
  report.add('process start: api compiled, CPU to ready', starts.compiled.cpuSeconds, 's', {
    name: 'through tsx',
    value: starts.tsx.cpuSeconds,
  });
  report.add('process start: api compiled, resident memory when ready', starts.compiled.rssMb, 'MB', {
    name: 'through tsx',
    value: starts.tsx.rssMb,
  });
}

export async function scaleModelSection({ ctx, config, report, samples }: BenchRun, scaleFactor: number) {
  // (k) The scale model, last: it leaves the database full.
  const empty = await scaleFigures(ctx, config, Math.min(samples, 200));
  const seeded = await seedScale(ctx, scaleFactor);
  process.stderr.write(
    `bench: seeded ${Object.entries(seeded.rows)
      .map(([t, n]) => `${n.toLocaleString('en-US')} ${t}`)
      .join(', ')} in ${seeded.seconds.toFixed(0)} s\n`,
  );
  const full = await scaleFigures(ctx, config, Math.min(samples, 200));
  for (const figure of SCALE_FIGURES) {
    report.add(
      `scale model: ${figure}, p50`,
      full[figure],
      'ms',
      { name: 'nearly empty database', value: empty[figure] },
      '<= 1.25x',
    );
  }
}
