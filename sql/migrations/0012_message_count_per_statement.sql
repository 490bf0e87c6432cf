-- The monthly user-message counter is bumped once per statement and
-- (tenant, month) instead of once per row: a batch of sends then writes one
-- new version of the tenant's counter row, not one per message. Every version
-- is a dead tuple the quota read on each send has to step over until vacuum,
-- so per-row bumps made that read the most expensive part of a send (measured).
drop trigger chat_messages_count_user on chat_messages;

create or replace function count_user_messages() returns trigger language plpgsql as $$
begin
  insert into tenant_message_counts (tenant_id, month, messages)
  select tenant_id, date_trunc('month', created_at at time zone 'UTC')::date, count(*)
  from inserted where role = 'user'
  group by 1, 2
  on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages + excluded.messages;
  return null;
end;
$$;

create trigger chat_messages_count_users after insert on chat_messages
  referencing new table as inserted
  for each statement execute function count_user_messages();

drop function count_user_message();
