// The audit list of operator actions.
import { listAudit, type AuditRow } from '../../../../core/console/audit.ts';
import { html, type Html } from '../../../pages/layout.ts';
import { shortId, utc, withQuery } from '../format.ts';
import type { ViewFn } from './view.ts';

export function auditTable(rows: readonly AuditRow[], empty: string): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`<table class="audit"><thead><tr><th>When</th><th>Who</th><th>Action</th><th>On</th><th>Why</th><th>Outcome</th></tr></thead><tbody>
${rows.map(
  (a) => html`<tr><td>${utc(a.at)}</td><td>${a.operator_email}</td><td><code>${a.action}</code></td>
<td>${a.job_id ? html`<a href="/console/jobs/${a.job_id}">job ${shortId(a.job_id)}</a> ` : ''}${a.tenant_id ? html`<a href="/console/tenants/${a.tenant_id}">${a.tenant_name ?? shortId(a.tenant_id)}</a>` : ''}</td>
<td>${a.reason}</td><td>${a.outcome}</td></tr>`,
)}</tbody></table>`;
}

export const auditView: ViewFn = async (ctx, { query }) => {
  const before = query.before && /^\d{1,15}$/.test(query.before) ? Number(query.before) : undefined;
  const { rows, more } = await listAudit(ctx.db, before ? { beforeId: before } : {});
  const live = html`<p class="muted small">Every action taken in the console, newest first. Kept 400 days.</p>
${auditTable(rows, 'No operator action has been taken yet.')}
<p>${before ? html`<a href="/console/audit">Newest</a> · ` : ''}${more ? html`<a rel="next" href="${withQuery('/console/audit', { before: String(rows.at(-1)!.id) })}">Older</a>` : ''}</p>`;
  return { title: 'Audit', live };
};
