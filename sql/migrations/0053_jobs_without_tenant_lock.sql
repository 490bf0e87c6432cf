-- The job row without a per-insert lock on its workspace.
--
-- The foreign key from jobs to tenants took a KEY SHARE lock on the
-- workspace's row at every insert: with many requests of one workspace at
-- once, each lock rewrote the row's xmax as a MultiXact (WAL, and a dirty
-- tenants page) -- about 300 of the 1,900 bytes of WAL of an enqueue. The
-- rule it kept (no job without its workspace) is kept here instead:
-- platform_write_jobs holds a shared advisory lock per workspace and then
-- checks that the workspace exists; a workspace's deletion takes the same
-- lock exclusively and deletes the workspace's jobs itself, after every
-- enqueue in flight has committed.
--
-- A job's wake-up names only the job ({jobId, base}): its input and
-- workspace are in the job's row, which the worker reads before it runs the
-- job anyway, so the input is stored once.

alter table jobs drop constraint jobs_tenant_id_fkey;

create or replace function platform_write_jobs(p_jobs platform_job[]) returns void
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_ids jsonb;
  v_busy text[];
begin
  -- The jobs' workspaces: held against deletion until this commits, then
  -- read again (a new statement, a new snapshot), so no job outlives its
  -- workspace. A shared advisory lock is memory only: no row lock, no WAL.
  perform pg_advisory_xact_lock_shared(hashtextextended('tenant-jobs:' || t.tenant_id::text, 0))
  from (select distinct x.tenant_id from unnest(p_jobs) x order by 1) t;
  if exists (select 1 from unnest(p_jobs) x where not exists (select 1 from tenants t where t.id = x.tenant_id)) then
    raise exception 'a job''s workspace does not exist' using errcode = 'foreign_key_violation';
  end if;
  select coalesce(array_agg(q.queue), '{}') into v_busy
  from (select distinct x.queue from unnest(p_jobs) x where x.queue is not null) q
  where exists (select 1 from jobs j
    where j.queue_name = q.queue and j.seq is not null and j.status in ('queued', 'running', 'cancelling')
    for share of j skip locked);
  select coalesce(jsonb_object_agg(t.job_id, t.id), '{}'::jsonb) into v_ids
  from platform_add_tickets(array(
    select row(x.kind,
        json_build_object('jobId', x.id, 'base', coalesce(x.base, 0)),
        null, x.run_at, greatest(1, x.max_attempts - coalesce(x.base, 0)), null, case when x.fair then 0 else -1 end,
        case when x.fair then array['fair'] end)::graphile_worker.job_spec
    from unnest(p_jobs) x where x.queue is null order by x.i), false) t;
  perform platform_add_tickets(array(
    select row(y.kind, json_build_object('queue', y.queue, 'tenantId', y.tenant_id), null, y.run_at, 25, 'q:' || y.queue, null,
        case when y.fair then array['fair'] end)::graphile_worker.job_spec
    from (select distinct on (x.queue) x.* from unnest(p_jobs) x
      where x.queue is not null and x.queue <> all (v_busy) order by x.queue, x.i) y
    order by y.queue), true);
  insert into jobs (id, tenant_id, kind, pool, queue_name, input, max_attempts, session_id, graphile_job_id)
  select x.id, x.tenant_id, x.kind, x.pool, x.queue, coalesce(x.input, '{}'::jsonb), x.max_attempts, x.session_id, (v_ids ->> x.id::text)::bigint
  from unnest(p_jobs) x where not coalesce(x.retry, false) order by x.i;
  if exists (select 1 from unnest(p_jobs) x where x.retry) then
    update jobs j set status = 'queued', max_attempts = x.max_attempts, error = null, result = null, progress = null,
      finished_at = null, not_before = null, seq = nextval('jobs_seq'), graphile_job_id = (v_ids ->> x.id::text)::bigint
    from unnest(p_jobs) x where x.retry and j.id = x.id and j.status = 'failed';
  end if;
  insert into account_job_count_changes (account_id, pool, delta)
  select t.account_id, x.pool, count(*)::int
  from unnest(p_jobs) x join tenants t on t.id = x.tenant_id
  group by 1, 2;
end;
$$;

-- A workspace deleted: its jobs go first (jobs_after_delete counts the
-- unfinished ones out of the account while the workspace is still there to
-- name it). A workspace changing hands moves its unfinished jobs' counts.
create or replace function tenants_move_open_jobs() returns trigger language plpgsql as $$
declare
  r record;
begin
  if tg_op = 'DELETE' then
    perform pg_advisory_xact_lock(hashtextextended('tenant-jobs:' || old.id::text, 0));
    delete from jobs where tenant_id = old.id;
    return old;
  end if;
  for r in select pool, count(*)::int as n from jobs where tenant_id = old.id and job_is_open(status) group by pool order by pool loop
    perform account_count_add(old.account_id, r.pool, -r.n);
    perform account_count_add(new.account_id, r.pool, r.n);
  end loop;
  return null;
end;
$$;
