// Overview, workers and schedules: the state of the platform as a whole.
import { readOverview, THROUGHPUT_MINUTES } from '../../../../core/console/overview.ts';
import { readQueueSamples, type QueueSample } from '../../../../core/console/samples.ts';
import { readSchedules, type ScheduleRun } from '../../../../core/console/schedules.ts';
import { line, stackedBars } from '../charts.ts';
import { listWorkerProcesses } from '../../../../core/console/workers.ts';
import { CRON_ITEMS } from '../../../../schedules/index.ts';
import { html } from '../../../pages/layout.ts';
import { duration, shortId, stateBadge, utc, withQuery } from '../format.ts';
import type { ViewFn } from './view.ts';

const card = (label: string, value: string | number, id?: string) =>
  html`<li class="card"${id ? html` id="${id}"` : ''}><span class="card-label">${label}</span><span class="card-value num">${value}</span></li>`;

/** The overview's charts: one sample a minute (core/console/samples.ts), the last hour's 60 minutes. */
async function hourCharts(db: Parameters<ViewFn>[0]['db']) {
  const samples = await readQueueSamples(db, 60);
  if (samples.length === 0)
    return html`<p class="muted" id="no-samples">No samples yet: the queue is sampled once a minute by the <code>queue_sample</code> schedule, so the charts start within a minute of a worker running.</p>`;
  const now = Math.floor(Date.now() / 60_000) * 60_000;
  const minutes = Array.from(
    { length: 60 },
    (_, i) => `${new Date(now - (59 - i) * 60_000).toISOString().slice(0, 16)}Z`,
  );
  const at = new Map(samples.map((s) => [s.at, s]));
  const pick = (f: (s: QueueSample) => number | null) =>
    minutes.map((m) => {
      const s = at.get(m);
      return s ? f(s) : null;
    });
  const labels = minutes.map((m) => m.slice(11, 16));
  const upkeep = [...samples].reverse().find((s) => s.upkeep !== null)?.upkeep;
  const upkeepNote = html`<span id="depth-upkeep">Leaves out the platform's own upkeep (its scheduled tasks, this sampler among them)${upkeep === undefined ? '' : html`: ${upkeep} open at the last sample`}.</span>`;
  return html`<div class="charts">
${stackedBars(
  'chart-finished',
  'Jobs finished per minute',
  'Platform jobs that succeeded and failed in each minute of the last hour.',
  labels,
  [
    { name: 'succeeded', colour: '#2e7d32', values: pick((s) => s.succeeded) },
    { name: 'failed', colour: '#c62828', values: pick((s) => s.failed) },
  ],
)}
${stackedBars(
  'chart-depth',
  'Queue depth',
  "Wake-ups of work in the queue at each minute of the last hour: ready to run, running, and waiting for their time; the platform's own scheduled upkeep is left out.",
  labels,
  [
    { name: 'ready', colour: '#1565c0', values: pick((s) => s.ready) },
    { name: 'running', colour: '#6a1b9a', values: pick((s) => s.running) },
    { name: 'waiting', colour: '#9e9e9e', values: pick((s) => s.waiting) },
  ],
  '',
  upkeepNote,
)}
${line(
  'chart-oldest',
  'Oldest ready job waiting',
  'How long the oldest job ready to run had waited, at each minute of the last hour (no point: nothing was waiting).',
  labels,
  { name: 'waiting', colour: '#ef6c00', values: pick((s) => s.oldest_ready_s) },
  ' s',
)}
</div>`;
}

/** The platform's own upkeep: the cron items' tasks, kept apart from the work in the totals and the depth chart. */
const UPKEEP_TASKS = CRON_ITEMS.map((item) => item.task);

export const overviewView: ViewFn = async ({ db }) => {
  const o = await readOverview(db, UPKEEP_TASKS);
  const perMinute = o.minutes.map((m) => m.succeeded + m.failed);
  const live = html`
<ul class="cards">
${card('Ready to run', o.totals.ready, 'total-ready')}${card('Running', o.totals.running, 'total-running')}
${card('Waiting (scheduled, parked, backing off)', o.totals.waiting, 'total-waiting')}${card('Failed in the last hour', o.totals.failed1h, 'total-failed')}
${card('Oldest ready job waiting', duration(o.totals.oldestReadyS))}
${card(`Finished per minute (last ${THROUGHPUT_MINUTES} min)`, perMinute.length ? Math.round(perMinute.reduce((a, b) => a + b, 0) / perMinute.length) : 0)}
</ul>
<p class="muted small" id="totals-upkeep">The counts leave out the platform's own upkeep (its scheduled tasks); the table below lists it, marked.</p>
<h2>By job kind</h2>
${
  o.kinds.length === 0
    ? html`<p class="muted">No job is in the queue, none finished in the last 10 minutes and none failed in the last hour.</p>`
    : html`
<table id="kinds"><thead><tr><th>Kind</th><th>Ready</th><th>Running</th><th>Waiting</th><th>Oldest ready</th><th>Succeeded (10 min)</th><th>Failed (1 h)</th></tr></thead><tbody>
${o.kinds.map(
  (
    k,
  ) => html`<tr data-kind="${k.kind}"><td><a href="${withQuery('/console/jobs', { kind: k.kind })}">${k.kind}</a>${k.upkeep ? html` <span class="muted small">upkeep</span>` : ''}</td><td>${k.ready}</td><td>${k.running}</td><td>${k.waiting}</td>
<td>${duration(k.oldest_ready_s)}</td><td>${k.succeeded_10m}</td><td>${k.failed_1h ? html`<a class="state-failed" href="${withQuery('/console/jobs', { kind: k.kind, state: 'failed' })}">${k.failed_1h}</a>` : 0}</td></tr>`,
)}
</tbody></table>`
}
<h2>The last hour (UTC)</h2>
${await hourCharts(db)}
<h2>Fair share by account</h2>
<p class="muted small">Accounts with work in the queue (the 20 busiest). Each account's jobs start in the order of its virtual time, which moves on by each job over the account's weight (its best plan); "ahead" is how far it ran before the pool's position, so its next jobs wait that long behind others'. Open jobs count against the plan's limit.</p>
${
  o.accounts.length === 0
    ? html`<p class="muted">No account has work in the queue.</p>`
    : html`
<table id="accounts"><thead><tr><th>Account</th><th>Workspaces</th><th>Weight</th><th>Ready</th><th>Running</th><th>Waiting</th><th>Open jobs / limit</th><th>Ahead of the pool</th></tr></thead><tbody>
${o.accounts.map(
  (
    a,
  ) => html`<tr><td><a href="${withQuery('/console/jobs', { account: a.account_id, state: 'open' })}">${a.owner_email ?? shortId(a.account_id)}</a></td><td>${a.tenants}</td><td>${a.weight ?? '—'}</td>
<td>${a.ready}</td><td>${a.running}</td><td>${a.waiting}</td><td>${a.open_jobs} / ${a.max_open_jobs ?? '—'}</td><td>${a.ahead_s && a.ahead_s > 0 ? duration(a.ahead_s) : 'even'}</td></tr>`,
)}
</tbody></table>`
}`;
  return { title: 'Overview', live };
};

export const workersView: ViewFn = async ({ db, config }) => {
  const processes = await listWorkerProcesses(db, config.worker.staleAfterMs);
  const live = html`
<p class="muted small">Each worker process beats every ${duration(config.worker.heartbeatMs / 1000)}; one silent for ${duration(config.worker.staleAfterMs / 1000)} is stale, and the dead-worker sweep gives its jobs to the others.</p>
${
  processes.length === 0
    ? html`<p class="muted" id="no-workers">No worker process is running. Start one with <code>npm run start:worker</code>.</p>`
    : html`
<table id="workers"><thead><tr><th>Host</th><th>PID</th><th>Version</th><th>Slots (short / I/O)</th><th>Started</th><th>Last heartbeat</th><th>Running jobs</th></tr></thead><tbody>
${processes.map(
  (p) => html`<tr class="${p.stale ? 'stale' : ''}"><td>${p.hostname}</td><td>${p.pid}</td><td>${p.version ?? '—'}</td>
<td>${p.concurrency ?? '—'} / ${p.io_concurrency ?? '—'}</td><td>${utc(p.started_at)}</td>
<td>${duration(p.seen_s_ago)} ago${p.stale ? html` <strong class="stale">stale</strong>` : ''}</td>
<td>${p.running.length === 0 ? html`<span class="muted">idle</span>` : p.running.map((r) => html`<div>${r.job_id ? html`<a href="/console/jobs/${r.job_id}">${r.kind} ${shortId(r.job_id)}</a>` : r.kind} <span class="muted small">for ${duration((Date.now() - new Date(r.locked_at).getTime()) / 1000)}</span></div>`)}</td></tr>`,
)}
</tbody></table>`
}`;
  return { title: 'Workers', live };
};

export const schedulesView: ViewFn = async ({ db }) => {
  const items = await readSchedules(db, CRON_ITEMS);
  const didText = (r: ScheduleRun) => r.error ?? JSON.stringify(r.detail ?? {});
  const took = (r: ScheduleRun) =>
    r.finished_at ? duration((new Date(r.finished_at).getTime() - new Date(r.started_at).getTime()) / 1000) : '—';
  const outcome = (s: (typeof items)[number]) =>
    !s.lastFiredAt
      ? html`<span class="muted">not run yet</span>`
      : s.lastRun
        ? html`${stateBadge(s.lastRun.status)} <code class="small">${didText(s.lastRun)}</code>`
        : html`<span class="muted">nothing to do</span>`;
  const live = html`
<p class="muted small">Graphile Worker's cron fires each item once across all worker processes; times are UTC. A run that found nothing to do is not recorded: its outcome says so.</p>
<table id="schedules"><thead><tr><th>Item</th><th>Task</th><th>Schedule</th><th>Last run</th><th>Its outcome</th><th>Next run</th></tr></thead><tbody>
${items.map(
  (
    s,
  ) => html`<tr id="schedule-${s.identifier}"><td>${s.identifier}</td><td><code>${s.task}</code></td><td><code>${s.match}</code></td>
<td>${s.lastFiredAt ? utc(s.lastFiredAt) : '—'}</td><td>${outcome(s)}</td><td>${utc(s.nextAt)}</td></tr>`,
)}
</tbody></table>
<h2>Recorded runs</h2>
${
  items.every((s) => s.runs.length === 0)
    ? html`<p class="muted">No run has recorded anything yet.</p>`
    : html`
<table id="schedule-runs" class="small"><thead><tr><th>Item</th><th>Started</th><th>Took</th><th>State</th><th>What it did</th></tr></thead><tbody>
${items
  .flatMap((s) => s.runs.map((r) => ({ s, r })))
  .sort((a, b) => b.r.started_at.localeCompare(a.r.started_at))
  .map(
    ({ s, r }) => html`<tr><td>${s.identifier}</td><td>${utc(r.started_at)}</td><td>${took(r)}</td>
<td>${stateBadge(r.status)}</td><td><code>${didText(r)}</code></td></tr>`,
  )}</tbody></table>`
}`;
  return { title: 'Schedules', live };
};
