-- Runner revocation: tenant Admins revoke a runner; its token stops working
-- at once (lookups only match active runners) and readiness never picks it.
-- The row stays so the runner's history (runner_work, managed agents that
-- name it) keeps pointing at something real.

alter table runners add column revoked_at timestamptz;
-- No route revoked runners before this migration; should a row have been
-- revoked by hand, it gets a timestamp so the check below holds.
update runners set revoked_at = now() where status = 'revoked';
alter table runners add constraint runners_revoked_at_check check ((status = 'revoked') = (revoked_at is not null));

-- The tenant's runner list pages newest first by (enrolled_at, id).
create index runners_tenant_enrolled_idx on runners (tenant_id, enrolled_at desc, id desc);
