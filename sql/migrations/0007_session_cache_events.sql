-- Api replicas cache, per request path, whether a user exists (and is the
-- operator) and which role a user has in a tenant. Changes reach every
-- replica's cache through these notifications.
create function user_cache_notify() returns trigger language plpgsql as $$
begin
  if tg_table_name = 'users' then
    perform pg_notify('user_cache_events', 'user:' || coalesce(new.id, old.id)::text);
  else
    perform pg_notify('user_cache_events', 'member:' || coalesce(new.tenant_id, old.tenant_id)::text || ':' || coalesce(new.user_id, old.user_id)::text);
  end if;
  return null;
end;
$$;
create trigger users_cache_notify after update of is_operator or delete on users
  for each row execute function user_cache_notify();
create trigger tenant_memberships_cache_notify after insert or update or delete on tenant_memberships
  for each row execute function user_cache_notify();
