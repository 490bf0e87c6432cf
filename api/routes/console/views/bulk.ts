// /console/jobs/bulk?action=retry|cancel&<the list's filters>: what a bulk
// action would do, before it does it: how many jobs, the newest of them,
// what becomes of each, and the form that does it (with a reason), or why
// it may not (more than BULK_LIMIT jobs).
import {
  BULK_ACTIONS,
  BULK_LIMIT,
  bulkEffect,
  overLimitMessage,
  previewBulk,
  type BulkAction,
} from '../../../../core/console/bulk.ts';
import { html } from '../../../pages/layout.ts';
import { shortId, stateBadge, utc, withQuery } from '../format.ts';
import { jobFilters } from './jobs.ts';
import type { ViewFn } from './view.ts';

export const bulkView: ViewFn = async (ctx, { query }) => {
  const action = (BULK_ACTIONS as readonly string[]).includes(query.action ?? '') ? (query.action as BulkAction) : null;
  if (!action) return null;
  const f = jobFilters(query);
  const filter = { state: f.state, kind: f.kind, tenantId: f.tenant, accountId: f.account, from: f.from, to: f.to };
  const preview = await previewBulk(ctx.db, action, filter);
  const listed = {
    state: f.state === 'any' ? undefined : f.state,
    kind: f.kind,
    tenant: f.tenant,
    account: f.account,
    from: f.from,
    to: f.to,
  };
  const what = action === 'retry' ? 'Retry failed jobs' : 'Cancel queued and running jobs';
  const described =
    [
      f.kind && `kind ${f.kind}`,
      f.tenant && `tenant ${shortId(f.tenant)}`,
      f.account && `account ${shortId(f.account)}`,
      f.from && `created from ${f.from}`,
      f.to && `to ${f.to}`,
    ]
      .filter(Boolean)
      .join(', ') || 'no other filter';
  const live = html`
<p id="bulk-summary"><strong>${preview.capped ? `More than ${preview.count.toLocaleString('en')}` : preview.count.toLocaleString('en')}</strong> job${preview.count === 1 ? '' : 's'} match (${described}). ${bulkEffect(action)}</p>
${preview.over ? html`<p class="error" id="bulk-refused">${overLimitMessage(preview.count, preview.capped)}</p>` : ''}
${
  preview.count === 0
    ? html`<p class="muted">Nothing to do.</p>`
    : html`
<table id="bulk-jobs" class="small"><caption class="muted">The newest ${preview.sample.length} of them</caption><thead><tr><th>Job</th><th>Kind</th><th>State</th><th>Attempts</th><th>Tenant</th><th>Created</th></tr></thead><tbody>
${preview.sample.map((j) => html`<tr><td><a href="/console/jobs/${j.id}">${shortId(j.id)}</a></td><td>${j.kind}</td><td>${stateBadge(j.status)}</td><td>${j.attempts} / ${j.max_attempts}</td><td>${j.tenant_name}</td><td>${utc(j.created_at)}</td></tr>`)}
</tbody></table>`
}`;
  const form =
    ctx.csrf && preview.count > 0 && !preview.over
      ? html`
<form method="post" action="/console/jobs/bulk" id="bulk-form"><input type="hidden" name="csrf" value="${ctx.csrf}"><input type="hidden" name="action" value="${action}">
${Object.entries(listed)
  .filter(([, v]) => v !== undefined)
  .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v!}">`)}
<label>Why (kept in the audit list, with each job) <input type="text" class="reason" name="reason" required maxlength="500"></label>
<button type="submit">${action === 'retry' ? 'Retry' : 'Cancel'} these jobs (up to ${BULK_LIMIT.toLocaleString('en')})</button>
<p class="muted small">The jobs that match when you press it are the ones changed, all together or none.</p></form>`
      : html``;
  return {
    title: what,
    top: html`<p><a href="${withQuery('/console/jobs', listed)}">Back to the list</a></p>`,
    live,
    bottom: form,
  };
};
