-- An operator can suspend a tenant (abuse, an unpaid contract, a legal hold):
-- its agents get 403 tenant_inactive on the Agent API and MCP, its people a
-- platform 403 tenant_inactive. Nothing is deleted; resuming clears the column.
alter table tenants
  add column suspended_at timestamptz,
  add column suspended_reason text check (char_length(suspended_reason) <= 500);

-- The per-replica caches must hear a suspension at once: the agent context
-- (one entry per registration of the tenant)...
drop trigger tenants_auth_notify on tenants;
create trigger tenants_auth_notify after update of plan, name, suspended_at or delete on tenants
  for each row execute function agent_auth_notify();

-- ...and the people's memberships (one entry per member of the tenant).
create function tenant_members_cache_notify() returns trigger language plpgsql as $$
declare
  rec record;
begin
  for rec in select user_id from tenant_memberships where tenant_id = new.id loop
    perform pg_notify('user_cache_events', 'member:' || new.id::text || ':' || rec.user_id::text);
  end loop;
  return null;
end;
$$;
create trigger tenants_members_cache_notify after update of suspended_at on tenants
  for each row when (new.suspended_at is distinct from old.suspended_at)
  execute function tenant_members_cache_notify();
