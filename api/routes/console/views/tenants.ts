// Tenants: a searchable list, and a tenant's page with its people, recent
// jobs, its suspension and the actions taken on it.
import { listAudit } from '../../../../core/console/audit.ts';
import { listJobs } from '../../../../core/console/jobs.ts';
import { consoleTenant, listTenants, type ConsoleTenant } from '../../../../core/console/tenants.ts';
import { listMembers } from '../../../../core/teams/members.ts';
import { ROLE_TITLES } from '../../../../core/tenants/roles.ts';
import { html, type Html } from '../../../pages/layout.ts';
import { parseCursor, shortId, stateBadge, utc, UUID, withQuery } from '../format.ts';
import { auditTable } from './audit.ts';
import type { ViewFn } from './view.ts';

const suspension = (t: ConsoleTenant) =>
  t.suspended_at
    ? html`<strong class="bad">suspended</strong> <span class="small">since ${utc(t.suspended_at)}</span>`
    : html`<span class="ok">active</span>`;

export const tenantsView: ViewFn = async (ctx, { query }) => {
  const search = query.search?.trim().slice(0, 200) || undefined;
  const suspended = query.suspended === 'yes' ? true : undefined;
  const cursor = parseCursor(query.before);
  const { rows, more } = await listTenants(ctx.db, { search, suspended, before: cursor });
  const base = { search, suspended: suspended ? 'yes' : undefined };
  const top = html`<form method="get" action="/console/tenants" class="filters">
<label>Name, id or owner e-mail <input type="text" name="search" value="${search ?? ''}" size="30"></label>
<label><input type="checkbox" name="suspended" value="yes"${suspended ? html` checked` : ''}> suspended only</label>
<button type="submit">Show</button> <a href="/console/tenants">Clear</a></form>`;
  const live = html`
${
  rows.length === 0
    ? html`<p class="muted">No tenant matches.</p>`
    : html`
<table id="tenants"><thead><tr><th>Tenant</th><th>Owner</th><th>Plan</th><th>Messages this month</th><th>State</th><th>Ready / running / waiting</th><th>Created</th></tr></thead><tbody>
${rows.map(
  (
    t,
  ) => html`<tr><td><a href="/console/tenants/${t.id}">${t.name}</a></td><td>${t.owner_email ?? '—'}</td><td>${t.plan}${t.plan_status !== 'active' ? ` (${t.plan_status})` : ''}</td>
<td>${t.messages_this_month}</td><td>${suspension(t)}</td><td>${t.ready} / ${t.running} / ${t.waiting}</td><td>${utc(t.created_at)}</td></tr>`,
)}
</tbody></table>`
}
<p>${cursor ? html`<a href="${withQuery('/console/tenants', base)}">Newest</a> · ` : ''}${more ? html`<a rel="next" href="${withQuery('/console/tenants', { ...base, before: rows.at(-1)!.cursor })}">Older tenants</a>` : ''}</p>`;
  return { title: 'Tenants', top, live };
};

const MEMBERS_SHOWN = 50;

export const tenantView: ViewFn = async (ctx, { params }) => {
  const id = params.tenantId ?? '';
  if (!UUID.test(id)) return null;
  const t = await consoleTenant(ctx.db, id);
  if (!t) return null;
  const jobs = await listJobs(ctx.db, { state: 'any', tenantId: id }, 20);
  const audit = await listAudit(ctx.db, { tenantId: id }, 20);
  const people = await listMembers(ctx.db, id, { limit: MEMBERS_SHOWN, after: null });
  const live = html`<dl>
<dt>State</dt><dd id="tenant-state">${suspension(t)}${t.suspended_reason ? html` — ${t.suspended_reason}` : ''}</dd>
<dt>Id</dt><dd><code>${t.id}</code></dd>
<dt>Owner</dt><dd>${t.owner_email ?? '—'} (account <a href="${withQuery('/console/jobs', { account: t.account_id })}"><code>${shortId(t.account_id)}</code></a>)</dd>
<dt>Plan</dt><dd>${t.plan} (${t.plan_status})</dd>
<dt>Messages this month</dt><dd>${t.messages_this_month}</dd>
<dt>In the queue</dt><dd>${t.ready} ready, ${t.running} running, ${t.waiting} waiting</dd>
<dt>Created</dt><dd>${utc(t.created_at)}</dd></dl>
<h2>People</h2>
${
  people.length === 0
    ? html`<p class="muted">No member.</p>`
    : html`<table id="members" class="small"><thead><tr><th>E-mail</th><th>Name</th><th>Role</th><th>Joined</th></tr></thead><tbody>
${people.slice(0, MEMBERS_SHOWN).map((m) => html`<tr><td>${m.email}</td><td>${m.display_name ?? '—'}</td><td>${ROLE_TITLES[m.role]}${m.owner ? ' (owner)' : ''}</td><td>${utc(m.created_at)}</td></tr>`)}
</tbody></table>${people.length > MEMBERS_SHOWN ? html`<p class="muted">The first ${MEMBERS_SHOWN} of more, in the order they joined.</p>` : ''}`
}
<h2>Recent jobs</h2>
${
  jobs.rows.length === 0
    ? html`<p class="muted">No job yet.</p>`
    : html`<table class="small"><thead><tr><th>Job</th><th>Kind</th><th>State</th><th>Created</th></tr></thead><tbody>
${jobs.rows.map((j) => html`<tr><td><a href="/console/jobs/${j.id}">${shortId(j.id)}</a></td><td>${j.kind}</td><td>${stateBadge(j.status)}</td><td>${utc(j.created_at)}</td></tr>`)}
</tbody></table>${jobs.more ? html`<p><a href="${withQuery('/console/jobs', { tenant: id })}">All of its jobs</a></p>` : ''}`
}
<h2>Operator actions on this tenant</h2>
${auditTable(audit.rows, 'No operator action on this tenant yet.')}`;
  const bottom = ctx.csrf === null ? undefined : suspendForm(ctx.csrf, t);
  return { title: `Tenant ${t.name}`, live, bottom };
};

function suspendForm(csrf: string, t: ConsoleTenant): Html {
  const suspend = !t.suspended_at;
  return html`<h2>Actions</h2><form method="post" action="/console/tenants/${t.id}/${suspend ? 'suspend' : 'resume'}" class="action">
<input type="hidden" name="csrf" value="${csrf}">
<p>${suspend ? 'Suspending keeps all its data; its people and agents are refused (403 tenant_inactive) until it is resumed.' : 'Resuming lets its people and agents in again.'}</p>
<label>Why (kept in the audit list) <input type="text" class="reason" name="reason" required maxlength="500" autocomplete="off"></label>
<button type="submit">${suspend ? 'Suspend this tenant' : 'Resume this tenant'}</button></form>`;
}
