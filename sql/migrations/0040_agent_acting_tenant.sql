-- A claimed agent acts in the organization its person chose on the claim
-- page (its own workspace is kept, never merged), else in its own
-- workspace: the acting tenant is coalesce(organization_id, tenant_id). It
-- stays linked while its principal is active and, once claimed, while the
-- person who claimed it is a member of the acting tenant.
create index agent_registrations_organization_idx on agent_registrations (organization_id) where organization_id is not null;
create index agent_registrations_claimed_by_idx on agent_registrations (claimed_by) where claimed_by is not null;

alter table agent_principals add column unlinked_at timestamptz, add column unlinked_by uuid references users (id) on delete set null;
alter table agent_registrations add column revoked_by uuid references users (id) on delete set null;

-- The per-replica agent caches forget a registration when anything its
-- check reads changes: the registration, its principal, the tenant it acts
-- in or owns, and the membership of the person who claimed it.
create or replace function agent_auth_notify() returns trigger language plpgsql as $$
declare
  rec record;
begin
  if tg_table_name = 'agent_registrations' then
    perform pg_notify('agent_auth_events', coalesce(new.id, old.id)::text);
  elsif tg_table_name = 'agent_principals' then
    for rec in select id from agent_registrations where principal_id = coalesce(new.id, old.id) loop
      perform pg_notify('agent_auth_events', rec.id::text);
    end loop;
  elsif tg_table_name = 'tenants' then
    for rec in select id from agent_registrations where tenant_id = coalesce(new.id, old.id)
               union select id from agent_registrations where organization_id = coalesce(new.id, old.id) loop
      perform pg_notify('agent_auth_events', rec.id::text);
    end loop;
  elsif tg_table_name = 'tenant_memberships' then
    for rec in select id from agent_registrations
               where claimed_by = coalesce(new.user_id, old.user_id)
                 and coalesce(organization_id, tenant_id) = coalesce(new.tenant_id, old.tenant_id) loop
      perform pg_notify('agent_auth_events', rec.id::text);
    end loop;
  end if;
  return null;
end;
$$;
create trigger tenant_memberships_agent_auth_notify after insert or update or delete on tenant_memberships
  for each row execute function agent_auth_notify();
