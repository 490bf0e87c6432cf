-- A job's waits and wake-ups name only the job, as its first wake-up does
-- since 0053: the worker reads the input and the workspace from the row.
create or replace function job_wait(p_job uuid, p_attempt integer, p_keep_attempt boolean, p_until timestamp with time zone, p_error jsonb, p_progress jsonb, p_set_progress boolean, p_locked_by text, p_locked_at timestamp with time zone, p_leave_queue boolean)
returns boolean
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  r record;
  v_base integer := case when p_keep_attempt then p_attempt - 1 else p_attempt end;
begin
  update jobs set status = 'queued', not_before = p_until, attempts = v_base,
    seq = case when p_leave_queue then null else seq end,
    error = coalesce(p_error, error),
    progress = case when p_set_progress then p_progress else progress end,
    locked_by = coalesce(p_locked_by, locked_by), started_at = coalesce(started_at, p_locked_at, now())
  where id = p_job and job_attempt_may_write(status, attempts, p_attempt)
  returning id, tenant_id, kind, queue_name, seq, input, max_attempts into r;
  if not found then return false; end if;
  if r.queue_name is null or r.seq is null then
    update jobs set graphile_job_id = t.id
    from platform_add_tickets(array[row(r.kind,
        json_build_object('jobId', r.id, 'base', v_base),
        null, p_until, greatest(1, r.max_attempts - v_base), 'j:' || r.id::text, -1, null)::graphile_worker.job_spec], false) t
    where jobs.id = r.id;
  end if;
  return true;
end;
$$;

create or replace function job_wake(p_job uuid, p_at timestamp with time zone)
returns void
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  r record;
begin
  update jobs set not_before = case when p_at > now() then p_at end
  where id = p_job and status = 'queued'
  returning id, tenant_id, kind, queue_name, seq, input, max_attempts, attempts into r;
  if not found then return; end if;
  if r.queue_name is not null and r.seq is not null then
    perform queue_wake(array[r.queue_name]);
  else
    update jobs set graphile_job_id = t.id
    from platform_add_tickets(array[row(r.kind,
        json_build_object('jobId', r.id, 'base', r.attempts),
        null, p_at, greatest(1, r.max_attempts - r.attempts), 'j:' || r.id::text, -1, null)::graphile_worker.job_spec], false) t
    where jobs.id = r.id;
  end if;
end;
$$;
