// The job list (filters, newest first, keyset pages) and a job's page.
import { RETRY_ATTEMPTS } from '../../../../core/console/actions.ts';
import { listAudit } from '../../../../core/console/audit.ts';
import {
  JOB_STATE_FILTERS,
  jobDetail,
  knownKinds,
  listJobs,
  maskSecrets,
  type HistoryRow,
  type JobDetail,
  type JobStateFilter,
} from '../../../../core/console/jobs.ts';
import { html, type Html } from '../../../pages/layout.ts';
import { duration, jsonBlock, parseCursor, shortId, stateBadge, utc, UUID, withQuery } from '../format.ts';
import { auditTable } from './audit.ts';
import type { ViewFn } from './view.ts';

const ISO_DAY_OR_TIME = /^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d)?)?$/;

/** The list's filters from the query string; anything malformed is dropped (and said so). */
export function jobFilters(query: Record<string, string | undefined>) {
  const ignored: string[] = [];
  const pick = (name: string, ok: (v: string) => boolean) => {
    const v = query[name]?.trim();
    if (!v) return undefined;
    if (ok(v)) return v;
    ignored.push(name);
    return undefined;
  };
  const state = (pick('state', (v) => (JOB_STATE_FILTERS as readonly string[]).includes(v)) ?? 'any') as JobStateFilter;
  return {
    ignored,
    state,
    kind: pick('kind', (v) => /^[a-z0-9_.:-]{1,100}$/i.test(v)),
    tenant: pick('tenant', (v) => UUID.test(v)),
    account: pick('account', (v) => UUID.test(v)),
    from: pick('from', (v) => ISO_DAY_OR_TIME.test(v)),
    to: pick('to', (v) => ISO_DAY_OR_TIME.test(v)),
    before: query.before,
  };
}

export const jobsView: ViewFn = async (ctx, { query }) => {
  const f = jobFilters(query);
  const cursor = parseCursor(f.before);
  const { rows, more } = await listJobs(ctx.db, {
    state: f.state,
    kind: f.kind,
    tenantId: f.tenant,
    accountId: f.account,
    from: f.from ? `${f.from}${f.from.length === 10 ? 'T00:00:00' : ''}Z` : undefined,
    to: f.to ? `${f.to}${f.to.length === 10 ? 'T00:00:00' : ''}Z` : undefined,
    before: cursor,
  });
  const kinds = ctx.csrf === null ? [] : knownKinds();
  const bulk = f.state === 'failed' ? 'retry' : ['open', 'queued', 'running'].includes(f.state) ? 'cancel' : null;
  // A kind given by a link or an old bookmark that no task has any more stays choosable.
  const choices = f.kind && !kinds.includes(f.kind) ? [...kinds, f.kind] : kinds;
  const base = {
    state: f.state === 'any' ? undefined : f.state,
    kind: f.kind,
    tenant: f.tenant,
    account: f.account,
    from: f.from,
    to: f.to,
  };
  const top = html`<form method="get" action="/console/jobs" class="filters">
<label>State <select name="state">${JOB_STATE_FILTERS.map((s) => html`<option value="${s}"${s === f.state ? html` selected` : ''}>${s === 'open' ? 'open (queued, running, cancelling)' : s}</option>`)}</select></label>
<label>Kind <select name="kind"><option value="">any kind</option>${choices.map((k) => html`<option value="${k}"${k === f.kind ? html` selected` : ''}>${k}</option>`)}</select></label>
<label>Tenant id <input type="text" name="tenant" value="${f.tenant ?? ''}" size="36"></label>
<label>Account id <input type="text" name="account" value="${f.account ?? ''}" size="36"></label>
<label>Created from (UTC) <input type="text" name="from" value="${f.from ?? ''}" placeholder="2026-11-26T08:00" size="16"></label>
<label>to <input type="text" name="to" value="${f.to ?? ''}" placeholder="2026-11-27" size="16"></label>
<button type="submit">Show</button> <a href="/console/jobs">Clear</a></form>
${
  bulk
    ? html`<form method="get" action="/console/jobs/bulk" class="bulk"><input type="hidden" name="action" value="${bulk}">
${Object.entries(base)
  .filter(([, v]) => v !== undefined)
  .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v!}">`)}
<button type="submit">${bulk === 'retry' ? 'Retry every job this filter matches…' : 'Cancel every job this filter matches…'}</button></form>`
    : ''
}
${f.ignored.length ? html`<p class="error">Ignored filters that were not valid: ${f.ignored.join(', ')}.</p>` : ''}`;
  const live = html`
${
  rows.length === 0
    ? html`<p class="muted" id="no-jobs">No job matches${cursor ? ' on this page' : ''}.</p>`
    : html`
<table id="jobs"><thead><tr><th>Job</th><th>Kind</th><th>State</th><th>Attempts</th><th>Tenant</th><th>Created</th><th>Finished</th></tr></thead><tbody>
${rows.map(
  (j) => html`<tr data-job="${j.id}"><td><a href="/console/jobs/${j.id}">${shortId(j.id)}</a></td><td>${j.kind}</td>
<td>${stateBadge(j.status)}${j.error_code ? html` <span class="small muted">${j.error_code}</span>` : ''}</td><td>${j.attempts} / ${j.max_attempts}</td>
<td><a href="/console/tenants/${j.tenant_id}">${j.tenant_name}</a></td><td>${utc(j.created_at)}</td><td>${utc(j.finished_at)}</td></tr>`,
)}
</tbody></table>`
}
<p>${cursor ? html`<a href="${withQuery('/console/jobs', base)}">Newest</a> · ` : ''}${more ? html`<a rel="next" href="${withQuery('/console/jobs', { ...base, before: rows.at(-1)!.cursor })}">Older jobs</a>` : html`<span class="muted">No older jobs.</span>`}</p>`;
  return { title: 'Jobs', top, live };
};

const EVENT_TEXT: Record<string, string> = {
  queued: 'queued again',
  started: 'started',
  progress: 'first progress',
  cancelling: 'asked to stop',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  error: 'attempt failed',
};

/**
 * A job's moments in time order: its row's own times, the failures kept in
 * job_history and, for a chat session's job, its session events (which
 * already hold its start and end).
 */
function timeline(job: JobDetail, history: readonly HistoryRow[]): HistoryRow[] {
  const rows: HistoryRow[] = [{ at: job.created_at, event: 'created', attempt: 0, error: null }, ...history];
  if (!job.session_id) {
    if (job.started_at) rows.push({ at: job.started_at, event: 'started', attempt: 1, error: null });
    const final = job.status === 'succeeded' || job.status === 'cancelled';
    if (final && job.finished_at)
      rows.push({ at: job.finished_at, event: job.status, attempt: job.attempts, error: null });
  }
  return rows.sort((a, b) => new Date(a.at).getTime() - new Date(b.at).getTime());
}

function errorText(error: unknown): string {
  if (!error || typeof error !== 'object') return '';
  const e = error as { code?: unknown; message?: unknown; retrying?: unknown };
  return `${String(e.code ?? 'error')}: ${String(e.message ?? '')}${e.retrying ? ' (retrying)' : ''}`;
}

/** Where a job's wake-up stands in Graphile's queue (its own, or its serial queue's). */
function queuePlace(g: NonNullable<JobDetail['graphile']>): Html {
  if (g.locked_at) return html`taken since ${utc(g.locked_at)} by <code>${g.locked_by}</code>`;
  if (new Date(g.run_at).getTime() > Date.now()) return html`waits until ${utc(g.run_at)}`;
  return html`due: waiting for a slot, at its place in the fair order`;
}

export const jobView: ViewFn = async (ctx, { params }) => {
  const id = params.jobId ?? '';
  if (!UUID.test(id)) return null;
  const found = await jobDetail(ctx.db, id);
  if (!found) return null;
  const { job, history } = found;
  const audit = await listAudit(ctx.db, { jobId: id }, 20);
  const open = job.status === 'queued' || job.status === 'running';
  const payload = job.input;
  const g = job.graphile;
  const live = html`
<dl>
<dt>State</dt><dd id="job-state">${stateBadge(job.status)}${job.status === 'cancelling' ? ' (its worker is stopping it)' : ''}</dd>
<dt>Kind</dt><dd><a href="${withQuery('/console/jobs', { kind: job.kind })}">${job.kind}</a></dd>
<dt>Tenant</dt><dd><a href="/console/tenants/${job.tenant_id}">${job.tenant_name}</a> (<code>${job.tenant_id}</code>; <a href="${withQuery('/console/jobs', { account: job.account_id })}">its account's jobs</a>)</dd>
<dt>Attempts</dt><dd>${job.attempts} of ${job.max_attempts}</dd>
${job.queue_name ? html`<dt>Serial queue</dt><dd><code>${job.queue_name}</code></dd>` : ''}
${job.session_id ? html`<dt>Chat session</dt><dd><code>${job.session_id}</code></dd>` : ''}
<dt>Created</dt><dd>${utc(job.created_at)}</dd>
<dt>Started</dt><dd>${utc(job.started_at)}</dd>
<dt>Finished</dt><dd>${utc(job.finished_at)}${job.finished_at && job.started_at ? html` <span class="muted">(ran ${duration((new Date(job.finished_at).getTime() - new Date(job.started_at).getTime()) / 1000)})</span>` : ''}</dd>
<dt>In the queue</dt><dd>${g ? queuePlace(g) : html`<span class="muted">not in the queue (finished, or not yet written)</span>`}</dd>
<dt>Worker</dt><dd>${job.worker ? html`<a href="/console/workers">${job.worker.hostname} pid ${job.worker.pid}</a>, last heartbeat ${utc(job.worker.last_seen_at)}` : html`<span class="muted">none holds it</span>`}</dd>
</dl>
${job.error ? html`<h2>Error</h2><p class="error">${errorText(job.error)}</p>` : ''}
<h2>Timeline</h2>
<table class="small" id="timeline"><thead><tr><th>At</th><th>Attempt</th><th>Event</th></tr></thead><tbody>
${timeline(job, history).map((h) => html`<tr><td>${utc(h.at)}</td><td>${h.attempt || '—'}</td><td>${h.event === 'created' ? 'queued' : (EVENT_TEXT[h.event] ?? h.event)}${h.error ? html` — <span class="state-failed">${errorText(h.error)}</span>` : ''}</td></tr>`)}
</tbody></table>
<h2>Progress</h2>${jsonBlock(job.progress)}
<h2>Result</h2>${jsonBlock(job.result)}
<h2>Payload</h2>
${payload === undefined || payload === null ? html`<p class="muted">The input is kept while the job is in the queue and after a final failure; this job's is gone.</p>` : html`<p class="muted small">Fields whose names sound secret are masked.</p>${jsonBlock(maskSecrets(payload))}`}
<h2>Operator actions on this job</h2>
${auditTable(audit.rows, 'No operator action on this job yet.')}`;
  const bottom = ctx.csrf === null ? undefined : actionForms(ctx.csrf, job.id, job.status === 'failed', open);
  return { title: `Job ${shortId(job.id)} (${job.kind})`, live, bottom };
};

function actionForms(csrf: string, jobId: string, failed: boolean, open: boolean): Html {
  if (!failed && !open) return html``;
  const form = (
    action: 'retry' | 'cancel',
    label: string,
    help: string,
  ) => html`<form method="post" action="/console/jobs/${jobId}/${action}" class="action">
<input type="hidden" name="csrf" value="${csrf}"><p>${help}</p>
<label>Why (kept in the audit list) <input type="text" class="reason" name="reason" required maxlength="500" autocomplete="off"></label>
<button type="submit">${label}</button></form>`;
  return html`<h2>Actions</h2>
${failed ? form('retry', 'Retry this job', `Run it again with the input it failed with, up to ${RETRY_ATTEMPTS} more attempts.`) : ''}
${open ? form('cancel', 'Cancel this job', 'A queued job is cancelled at once; a running one is asked to stop and ends as cancelled.') : ''}`;
}
