-- A claim's start time is the moment it claims, not the start of its
-- statement: one call claims for many queues in turn and may wait on a row
-- lock before it reaches a queue (the end of the job ahead), so now() could
-- date a start before the end it waited for.
create or replace function queue_claim(p_queues text[], p_holders text[])
returns table (queue text, outcome text, job_id uuid, tenant_id uuid, kind text, input jsonb, attempt integer,
  max_attempts integer)
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
  q text;
  n integer;
  h record;
begin
  for n in 1 .. coalesce(cardinality(p_queues), 0) loop
    q := p_queues[n];
    select j.id, j.tenant_id, j.kind, j.status, j.not_before, j.attempts, j.input, j.max_attempts into h
    from jobs j where j.queue_name = q and j.seq is not null and j.status in ('queued', 'running', 'cancelling') order by j.seq limit 1 for update;
    if not found then
      return query select q, 'empty', null::uuid, null::uuid, null::text, null::jsonb, null::int, null::int;
    elsif h.status <> 'queued' then
      return query select q, 'busy', h.id, h.tenant_id, h.kind, null::jsonb, null::int, null::int;
    elsif h.not_before > now() then
      perform queue_wake(array[q]);
      return query select q, 'later', h.id, h.tenant_id, h.kind, null::jsonb, null::int, null::int;
    else
      update jobs set status = 'running', attempts = h.attempts + 1, locked_by = p_holders[n], not_before = null,
        started_at = coalesce(started_at, clock_timestamp())
      where id = h.id;
      return query select q, 'claimed', h.id, h.tenant_id, h.kind, h.input, h.attempts + 1, h.max_attempts;
    end if;
  end loop;
end;
$$;
