-- Lean job events. The row trigger jobs_notify sent every changed job's
-- whole row as JSON on job_events, one NOTIFY per row, and every api parsed
-- each one, followed or not. Now the statement trigger that already runs on
-- every update of jobs (jobs_after_update, from 0043: its count changes and
-- queue wake-ups unchanged) also announces the jobs whose status, progress,
-- result, error or attempts changed (what jobs_notify's WHEN clause chose):
-- per job `<id>:<version>:<tenant id>`, comma-separated, as few
-- notifications as fit under NOTIFY's 8,000 bytes. An api looks each id up
-- in the jobs its sockets follow and reads only those rows
-- (core/jobs/events.ts).

drop trigger jobs_notify on jobs;
drop function jobs_notify();

create or replace function jobs_after_update() returns trigger language plpgsql
set enable_nestloop = off
set plan_cache_mode = force_generic_plan
as $$
declare
  v_queues text[];
  v_event text;
begin
  insert into account_job_count_changes (account_id, pool, delta)
  select t.account_id, n.pool, -count(*)::int
  from changed_new n join changed_old o on o.id = n.id join tenants t on t.id = n.tenant_id
  where o.status in ('queued', 'running', 'cancelling') and n.status not in ('queued', 'running', 'cancelling')
  group by 1, 2;
  select array_agg(distinct o.queue_name) into v_queues
  from changed_new n join changed_old o on o.id = n.id
  where o.queue_name is not null and o.seq is not null and o.status in ('queued', 'running', 'cancelling')
    and (n.status not in ('queued', 'running', 'cancelling') or n.seq is null
      or (o.status <> 'queued' and n.status = 'queued'));
  if v_queues is not null then perform queue_wake(v_queues); end if;
  -- Entries are ASCII (about 80 bytes each): a part ends before its running
  -- length passes the next multiple of 7,800 bytes.
  for v_event in
    select string_agg(e.entry, ',' order by e.n)
    from (
      select c.entry, c.n, (sum(length(c.entry) + 1) over (order by c.n) - 1) / 7800 as part
      from (
        select n.id::text || ':' || n.version || ':' || n.tenant_id::text as entry, row_number() over () as n
        from changed_new n join changed_old o on o.id = n.id
        where (o.status, o.progress, o.result, o.error, o.attempts)
          is distinct from (n.status, n.progress, n.result, n.error, n.attempts)
      ) c
    ) e
    group by e.part
    order by e.part
  loop
    perform pg_notify('job_events', v_event);
  end loop;
  return null;
end;
$$;
