-- One job engine on Graphile Worker's public interface (docs/engine.md).
--
-- Graphile Worker jobs become wake-ups: each names what to run, a platform
-- job ({jobId, tenantId, input}) or a serial queue ({queue, tenantId}), and
-- everything the platform decides by lives in its own tables:
-- - a serial queue's order is the data: its next job is its oldest open one
--   (jobs.seq); a worker claims it (marks it running) and, when it ends, a
--   trigger wakes the queue's next job with a wake-up keyed by the queue;
-- - a job that waits (a retry's backoff, a Retry-After, a runner not ready)
--   ends its attempt and is woken by a new wake-up at its time;
-- - the fair order is written as each wake-up's run_at, computed from the
--   account's unfinished jobs (account_job_counts) when it is added;
-- - every Graphile job is added through graphile_worker.add_jobs, called by
--   platform_add_tickets only; new jobs come in through platform_enqueue.
-- Graphile's schema is left exactly as its own migrations make it.

-- 1. What the old engine put into Graphile Worker's schema goes. -------------
drop trigger if exists announce_unlock on graphile_worker._private_job_queues;
drop trigger if exists platform_drop_finished_on_unlock on graphile_worker._private_jobs;
drop index if exists graphile_worker.platform_parked_jobs;
drop index if exists graphile_worker.platform_queue_order;
drop index if exists graphile_worker.platform_parked_queues;
drop function if exists announce_unlocked_job_queue();
drop function if exists graphile_drop_finished_on_unlock();
drop function if exists wake_parked_jobs();
alter function graphile_worker.add_jobs(graphile_worker.job_spec[], boolean) reset plan_cache_mode;
-- Jobs the old engine parked go back to the queue, by Graphile's own function.
select graphile_worker.force_unlock_workers(array['platform:parked']);

-- 2. What a job row carries for the engine. -------------------------------------
create sequence jobs_seq;
alter table jobs
  -- The pool of slots that runs it (core/jobs/pools.ts); its account's counts are per pool.
  add column pool text not null default 'short' check (pool in ('short', 'io')),
  -- Its place in its serial queue; null while it waits outside the queue (a channel link waiting for its binding).
  add column seq bigint default nextval('jobs_seq'),
  -- A job that waits is not run before this.
  add column not_before timestamptz,
  -- The task's input: a serial job's wake-up does not carry it, and a retry from the console reuses it.
  add column input jsonb;
update jobs set pool = 'io'
where status in ('queued', 'running', 'cancelling')
  and kind in ('chat.turn', 'company.run', 'channel.deliver', 'channel.link', 'channel.disconnect', 'partner.token-revocation', 'diag.wait');
with ordered as (
  select id, row_number() over (order by created_at, id) as n from jobs
  where queue_name is not null and status in ('queued', 'running', 'cancelling')
)
update jobs j set seq = o.n from ordered o where o.id = j.id;
select setval('jobs_seq', greatest(coalesce((select max(seq) from jobs), 0), 1));
update jobs set input = retry_input where retry_input is not null;
-- Unfinished jobs from before this migration keep the input their Graphile job carried (read once, here).
update jobs j set input = (g.payload -> 'input')::jsonb
from graphile_worker._private_jobs g
where j.input is null and j.status in ('queued', 'running', 'cancelling') and g.payload ->> 'jobId' = j.id::text;
alter table jobs drop column retry_input;
create index jobs_queue_head_idx on jobs (queue_name, seq)
  where queue_name is not null and seq is not null and status in ('queued', 'running', 'cancelling');

-- 3. Unfinished jobs per account and pool. -------------------------------------------
-- A change of an account's count is a row appended to account_job_count_changes
-- (no lock: requests of one account never wait for each other's commit);
-- api and worker processes fold them into account_job_counts every second or
-- two (account_job_counts_fold). An account's count is its folded count plus
-- its changes not folded yet. The counts decide the quota of unfinished jobs
-- and each new job's place in the fair order.
create table account_job_counts (
  account_id uuid not null,
  pool text not null check (pool in ('short', 'io')),
  open integer not null default 0,
  primary key (account_id, pool)
);
create table account_job_count_changes (
  account_id uuid not null,
  pool text not null check (pool in ('short', 'io')),
  delta integer not null
);
create index account_job_count_changes_idx on account_job_count_changes (account_id, pool);
insert into account_job_counts (account_id, pool, open)
select t.account_id, j.pool, count(*) from jobs j join tenants t on t.id = j.tenant_id
where job_is_open(j.status) group by 1, 2;

drop trigger if exists jobs_count_open_inserted on jobs;
drop trigger if exists jobs_count_open_finished on jobs;
drop trigger if exists jobs_count_open_deleted on jobs;
drop function if exists jobs_count_open_inserted();
drop function if exists jobs_count_open_finished();
drop function if exists jobs_count_open_deleted();
drop function if exists fold_open_job_drops();
drop function if exists check_open_job_room(uuid[]);
drop function if exists account_open_jobs_add(uuid[], integer[]);
drop function if exists chat_send_round(jsonb, jsonb, integer, text[], text, boolean);
drop function if exists chat_send_quota_race(uuid);
drop function if exists fair_run_at(uuid[], text[]);
drop table if exists account_open_job_drops, account_open_jobs, fair_accounts;

-- Appends a change of `delta` jobs to (account, pool).
create function account_count_add(p_account uuid, p_pool text, p_delta integer) returns void
language sql as $$
  insert into account_job_count_changes (account_id, pool, delta)
  select p_account, p_pool, p_delta where p_delta <> 0 and p_account is not null
$$;

-- Appends the jobs of these (tenant, pool) pairs to their accounts' counts
-- (p_sign -1: takes them away), one row per account and pool.
create function account_counts_add(p_tenants uuid[], p_pools text[], p_sign integer) returns void
language sql as $$
  insert into account_job_count_changes (account_id, pool, delta)
  select t.account_id, x.pool, p_sign * count(*)::int
  from unnest(p_tenants, p_pools) as x(tenant_id, pool) join tenants t on t.id = x.tenant_id
  group by 1, 2
$$;

-- Folds the changes appended so far into the counts, in one statement (a
-- reader sees the changes or their sum, never both); how many it folded.
create function account_job_counts_fold() returns integer
language sql as $$
  with moved as (
    delete from account_job_count_changes returning account_id, pool, delta
  ), summed as (
    select account_id, pool, sum(delta)::int as delta, count(*)::int as n from moved group by 1, 2
  ), folded as (
    insert into account_job_counts as c (account_id, pool, open)
    select account_id, pool, delta from summed order by 1, 2
    on conflict (account_id, pool) do update set open = c.open + excluded.open
  )
  select coalesce(sum(n), 0)::int from summed
$$;

-- An account's unfinished jobs in a pool: its folded count and its changes not folded yet.
create function account_pool_count(p_account uuid, p_pool text) returns integer language sql stable as $$
  select (coalesce((select sum(c.open) from account_job_counts c where c.account_id = p_account and c.pool = p_pool), 0)
    + coalesce((select sum(d.delta) from account_job_count_changes d where d.account_id = p_account and d.pool = p_pool), 0))::int
$$;

create or replace function account_open_count(p_account uuid) returns integer language sql stable as $$
  select greatest(0, account_pool_count(p_account, 'short') + account_pool_count(p_account, 'io'))
$$;

-- A workspace deleted with its jobs, or changing hands: its unfinished jobs leave (or move between) accounts.
create or replace function tenants_move_open_jobs() returns trigger language plpgsql as $$
declare
  r record;
begin
  for r in select pool, count(*)::int as n from jobs where tenant_id = old.id and job_is_open(status) group by pool order by pool loop
    perform account_count_add(old.account_id, r.pool, -r.n);
    if tg_op = 'UPDATE' then perform account_count_add(new.account_id, r.pool, r.n); end if;
  end loop;
  return case when tg_op = 'DELETE' then old end;
end;
$$;

-- 4. Graphile Worker jobs: added here only. -----------------------------------------
-- The functions of the engine run with generic plans (plan_cache_mode):
-- their statements take arrays and JSON whose values do not change the best
-- plan, and under the default the planner kept making a custom plan on
-- every call (add_jobs: 0.6 ms a call planned each time, 0.15 ms with its
-- generic plans, at 50,000 jobs queued). The setting is this function's
-- own, and holds for add_jobs while it is called from here.
create function platform_add_tickets(p_specs graphile_worker.job_spec[], p_preserve_run_at boolean)
returns table (id bigint, job_key text, job_id text)
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
  if coalesce(cardinality(p_specs), 0) = 0 then return; end if;
  return query select a.id, a.key, a.payload ->> 'jobId' from graphile_worker.add_jobs(p_specs, p_preserve_run_at) a;
end;
$$;

-- 5. The fair order. ------------------------------------------------------------------
-- A new job's start tag, written as its wake-up's run_at: the pool's
-- position (the latest tag a worker started, fair_clock) plus 16 µs per
-- unfinished job its account has in the pool, divided by its plan's weight.
-- Tags are virtual time: the clock starts at 2000-01-01 and moves only as
-- jobs start (16 µs a job), so it stays far behind the wall clock and every
-- tagged job is due at once; Graphile Worker starts due jobs in run_at
-- order, so in tag order. A quiet account's job is tagged at the position,
-- ahead of every backlog. Jobs with a time of their own (a wait, a retry,
-- the platform's own upkeep) have priority -1: due, they go first.
create or replace function fair_position(p_pool text) returns timestamptz language sql stable as $$
  select least(now(), coalesce((select vtime from fair_clock where pool = p_pool), timestamptz '2000-01-01 00:00:00+00'))
$$;

create function fair_tag(p_account uuid, p_pool text, p_ahead bigint) returns timestamptz language sql stable as $$
  select least(now(), fair_position(p_pool)
    + greatest(p_ahead, 0) * (16.0 / coalesce((select l.fair_weight from account_limits(p_account) l), 1)) * interval '1 microsecond')
$$;

-- The old engine's clock followed the wall clock: start over from the
-- epoch, and put the jobs it tagged at the head (Graphile's own reschedule_jobs).
delete from fair_clock;
select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where locked_at is null and flags ? 'fair'),
  run_at := timestamptz '2000-01-01 00:00:00+00');

-- 6. New jobs. ---------------------------------------------------------------------------
-- A platform job as the functions below pass it: its place in the request
-- (i), its row, its own time (run_at) or its start tag, whether that is a
-- tag (fair), whether it counts against its account's limit (quota), and a
-- failed job to queue again (retry) with the attempts it had made (base).
create type platform_job as (
  i integer, id uuid, tenant_id uuid, kind text, pool text, queue text, input jsonb, run_at timestamptz,
  fair boolean, max_attempts integer, session_id uuid, quota boolean, retry boolean, base integer
);
-- What platform_decide says of one.
create type platform_decision as (i integer, run_at timestamptz, refused boolean, plan text, max_open integer, open integer);

-- What new jobs would be given, read without a lock: each one's start tag
-- (null when it has a time of its own) and, for work that counts against
-- the account's limit of unfinished jobs (quota), whether it is refused.
-- Jobs are counted in input order, so once an account reaches its limit
-- every later quota job is refused.
create function platform_decide(p_jobs platform_job[])
returns setof platform_decision
language plpgsql stable
set plan_cache_mode = force_generic_plan
as $$
begin
  return query
  with input as (
    select x.i, x.pool, x.fair, coalesce(x.quota, false) as quota, t.account_id
    from unnest(p_jobs) x
    left join lateral (select t.account_id from tenants t where t.id = x.tenant_id limit 1) t on true
  ), accounts as (
    select a.account_id, l.plan, l.max_open_jobs, l.fair_weight, account_open_count(a.account_id) as open
    from (select distinct x.account_id from input x where x.account_id is not null) a
    cross join lateral account_limits(a.account_id) l
  ), keys as (
    select k.account_id, k.pool, fair_position(k.pool) as position, account_pool_count(k.account_id, k.pool) as pool_open
    from (select distinct x.account_id, x.pool from input x where x.account_id is not null) k
  ), decided as (
    select x.i, x.pool, x.fair, x.account_id, a.plan, a.max_open_jobs, a.fair_weight, a.open,
      coalesce(x.quota and a.open + count(*) over (partition by x.account_id order by x.i
        rows between unbounded preceding and 1 preceding) >= a.max_open_jobs, false) as refused
    from input x left join accounts a on a.account_id = x.account_id
  )
  select d.i,
    case when d.fair and not d.refused then least(now(), k.position + (k.pool_open
      + count(*) filter (where d.fair and not d.refused) over (partition by d.account_id, d.pool order by d.i
          rows between unbounded preceding and 1 preceding))
      * (16.0 / coalesce(d.fair_weight, 1)) * interval '1 microsecond') end,
    d.refused, d.plan, d.max_open_jobs, d.open
  from decided d left join keys k on k.account_id = d.account_id and k.pool = d.pool
  order by d.i;
end;
$$;

-- Writes decided jobs: their rows, their wake-ups, their accounts' counts.
-- A job outside a serial queue gets a wake-up of its own (its id kept on the
-- row, so a cancel can take it out). A serial queue that has an unfinished
-- job already needs none: that job's end wakes the queue (jobs_after_update),
-- and the row is locked FOR SHARE here so that its end waits for this commit
-- and then sees the new job. A row being changed right now is skipped (SKIP
-- LOCKED: no waiting, so no deadlock with a worker ending several jobs), and
-- a queue with no such row gets a wake-up keyed by the queue, which keeps an
-- earlier time it already has. A retry's row is reset instead of inserted,
-- and goes to the back of its queue. Rows are written in input order, so a
-- queue's jobs run in that order.
create function platform_write_jobs(p_jobs platform_job[]) returns void
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_ids jsonb;
  v_busy text[];
begin
  select coalesce(array_agg(q.queue), '{}') into v_busy
  from (select distinct x.queue from unnest(p_jobs) x where x.queue is not null) q
  where exists (select 1 from jobs j
    where j.queue_name = q.queue and j.seq is not null and j.status in ('queued', 'running', 'cancelling')
    for share of j skip locked);
  select coalesce(jsonb_object_agg(t.job_id, t.id), '{}'::jsonb) into v_ids
  from platform_add_tickets(array(
    select row(x.kind,
        json_build_object('jobId', x.id, 'tenantId', x.tenant_id, 'input', coalesce(x.input, '{}'::jsonb), 'base', coalesce(x.base, 0)),
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

-- The one way in for new jobs (core/jobs/enqueue.ts calls it; so do
-- chat_send_round and the partner-revocation trigger). Each element is a
-- platform job ({id, tenant_id, kind, pool, queue?, input, run_at?,
-- max_attempts, session_id?, quota?, retry?, base?}) or a job of the
-- platform itself with no tenant ({system: true, kind, payload, key?,
-- run_at?, max_attempts?, preserve_run_at?}). A quota job over its account's
-- limit fails the statement with SQLSTATE QJ001, the numbers in the detail
-- (core/jobs/quota.ts), and nothing is written.
create function platform_enqueue(p_jobs jsonb) returns void
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_jobs platform_job[];
  v_decisions platform_decision[];
  v_over platform_decision;
begin
  select array_agg(row(e.n, x.id, x.tenant_id, x.kind, x.pool, x.queue, x.input, x.run_at, x.run_at is null,
      x.max_attempts, x.session_id, x.quota, x.retry, x.base)::platform_job order by e.n)
  into v_jobs
  from jsonb_array_elements(p_jobs) with ordinality as e(v, n)
  cross join lateral jsonb_to_record(e.v) as x(id uuid, tenant_id uuid, kind text, pool text, queue text, input jsonb,
    run_at timestamptz, max_attempts integer, session_id uuid, quota boolean, retry boolean, base integer, system boolean)
  where not coalesce(x.system, false);
  if v_jobs is not null then
    select array_agg(d order by d.i) into v_decisions from platform_decide(v_jobs) d;
    select d.* into v_over from unnest(v_decisions) d where d.refused limit 1;
    if found then
      raise exception 'the account has % unfinished jobs; its % plan allows %', v_over.open, v_over.plan, v_over.max_open
        using errcode = 'QJ001', detail = json_build_object('plan', v_over.plan, 'limit', v_over.max_open, 'open', v_over.open)::text;
    end if;
    perform platform_write_jobs(array(
      select row(j.i, j.id, j.tenant_id, j.kind, j.pool, j.queue, j.input, coalesce(j.run_at, d.run_at), j.fair,
          j.max_attempts, j.session_id, j.quota, j.retry, j.base)::platform_job
      from unnest(v_jobs) j join unnest(v_decisions) d on d.i = j.i order by j.i));
  end if;
  if jsonb_path_exists(p_jobs, '$[*] ? (@.system == true)') then
    perform platform_add_tickets(array(
      select row(e ->> 'kind', coalesce(e -> 'payload', '{}'::jsonb)::json, null, (e ->> 'run_at')::timestamptz,
          coalesce((e ->> 'max_attempts')::int, 25), e ->> 'key', -1, null)::graphile_worker.job_spec
      from jsonb_array_elements(p_jobs) e
      where coalesce((e ->> 'system')::boolean, false) and not coalesce((e ->> 'preserve_run_at')::boolean, false)), false);
    perform platform_add_tickets(array(
      select row(e ->> 'kind', coalesce(e -> 'payload', '{}'::jsonb)::json, null, (e ->> 'run_at')::timestamptz,
          coalesce((e ->> 'max_attempts')::int, 25), e ->> 'key', -1, null)::graphile_worker.job_spec
      from jsonb_array_elements(p_jobs) e
      where coalesce((e ->> 'system')::boolean, false) and coalesce((e ->> 'preserve_run_at')::boolean, false)), true);
  end if;
end;
$$;

-- 7. Serial queues: order by the data. ---------------------------------------------------
-- A queue's next job is its oldest unfinished one. Waking a queue gives
-- that job a wake-up keyed by the queue (replacing a pending one): at its
-- not_before when it waits, else at its account's place in the fair order
-- (ahead of new work once it has run before: it held its place then).
-- Nothing when the job is held by an attempt or the queue is empty.
create function queue_wake(p_queues text[]) returns void
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
begin
  perform platform_add_tickets(array(
    select row(h.kind, json_build_object('queue', q.queue, 'tenantId', h.tenant_id), null,
        case when h.not_before > now() then h.not_before
          else fair_tag(t.account_id, h.pool, account_pool_count(t.account_id, h.pool) - 1) end,
        25, 'q:' || q.queue, case when h.attempts > 0 then -1 else 0 end,
        case when h.not_before is null or h.not_before <= now() then array['fair'] end)::graphile_worker.job_spec
    from (select distinct x.queue from unnest(p_queues) as x(queue) where x.queue is not null order by 1) q
    cross join lateral (
      select j.tenant_id, j.kind, j.pool, j.status, j.not_before, j.attempts from jobs j
      where j.queue_name = q.queue and j.seq is not null and j.status in ('queued', 'running', 'cancelling') order by j.seq limit 1) h
    join tenants t on t.id = h.tenant_id
    where h.status = 'queued'), false);
end;
$$;

-- Wake-ups of queues run here: each queue's oldest unfinished job is claimed
-- for the attempt of the worker pool named beside it when it is queued and
-- its time has come: marked running by that attempt (its first write). The
-- row lock makes claims of one queue take turns, and a claim that meets a
-- job's final write waits for it and then sees the next job.
-- Outcomes: 'claimed' (with the job), 'busy' (an attempt holds it; its end
-- wakes the queue), 'later' (it waits; woken again at its time), 'empty'.
create function queue_claim(p_queues text[], p_holders text[])
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
        started_at = coalesce(started_at, now())
      where id = h.id;
      return query select q, 'claimed', h.id, h.tenant_id, h.kind, h.input, h.attempts + 1, h.max_attempts;
    end if;
  end loop;
end;
$$;

-- 8. Waits. -----------------------------------------------------------------------------
-- An attempt that waits (JobWait, or a failure to retry) ends: its job is
-- queued again until p_until, the attempt counted as made or not
-- (p_keep_attempt), its error and progress as given. A serial job stays its
-- queue's next (the trigger below wakes the queue at p_until), unless it
-- gives up its place (p_leave_queue: a channel link waiting for its binding
-- lets its channel's replies go on); any other job gets a wake-up of its own
-- at p_until, keyed by its id. False when the
-- attempt may no longer write (job_attempt_may_write).
create function job_wait(p_job uuid, p_attempt integer, p_keep_attempt boolean, p_until timestamptz,
  p_error jsonb, p_progress jsonb, p_set_progress boolean, p_locked_by text, p_locked_at timestamptz, p_leave_queue boolean)
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
        json_build_object('jobId', r.id, 'tenantId', r.tenant_id, 'input', coalesce(r.input, '{}'::jsonb), 'base', v_base),
        null, p_until, greatest(1, r.max_attempts - v_base), 'j:' || r.id::text, -1, null)::graphile_worker.job_spec], false) t
    where jobs.id = r.id;
  end if;
  return true;
end;
$$;

-- Moves a waiting job's wake-up to p_at (the binding of a channel link wakes its last step).
create function job_wake(p_job uuid, p_at timestamptz) returns void
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
        json_build_object('jobId', r.id, 'tenantId', r.tenant_id, 'input', coalesce(r.input, '{}'::jsonb), 'base', r.attempts),
        null, p_at, greatest(1, r.max_attempts - r.attempts), 'j:' || r.id::text, -1, null)::graphile_worker.job_spec], false) t
    where jobs.id = r.id;
  end if;
end;
$$;

-- 9. Triggers on jobs. ------------------------------------------------------------------
-- A final job waits for nothing.
create or replace function jobs_touch() returns trigger language plpgsql as $$
begin
  new.version := old.version + 1;
  new.updated_at := now();
  if new.status in ('succeeded', 'failed', 'cancelled') then new.not_before := null; end if;
  return new;
end;
$$;

-- After any update of jobs, once per statement: jobs that ended leave their
-- accounts' counts, and a serial queue whose running job ended, waits, was
-- let go (its worker lost) or left the queue wakes its next job (or the same
-- one, at its time). (Its joins of the transition tables, which have no
-- statistics, must not be nested loops: a batch of 500 results would
-- compare 250,000 pairs.)
create function jobs_after_update() returns trigger language plpgsql
set enable_nestloop = off
set plan_cache_mode = force_generic_plan
as $$
declare
  v_queues text[];
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
  return null;
end;
$$;
create trigger jobs_after_update after update on jobs
  referencing old table as changed_old new table as changed_new
  for each statement execute function jobs_after_update();

-- Unfinished jobs deleted (retention never deletes those; a workspace's
-- deletion does, after tenants_move_open_jobs counted them out, when their
-- tenant is no longer found here).
create function jobs_after_delete() returns trigger language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_gone record;
  v_queues text[];
begin
  select array_agg(o.tenant_id) as tenants, array_agg(o.pool) as pools into v_gone
  from changed_old o where o.status in ('queued', 'running', 'cancelling');
  if v_gone.tenants is not null then perform account_counts_add(v_gone.tenants, v_gone.pools, -1); end if;
  select array_agg(distinct o.queue_name) into v_queues from changed_old o
  where o.queue_name is not null and o.seq is not null and o.status in ('queued', 'running', 'cancelling');
  if v_queues is not null then perform queue_wake(v_queues); end if;
  return null;
end;
$$;
create trigger jobs_after_delete after delete on jobs
  referencing old table as changed_old
  for each statement execute function jobs_after_delete();

-- A job cancelled while queued, or deleted unfinished, takes its wake-up out
-- of Graphile's queue (one a worker holds already is left to it: the cancel
-- reaches that worker by job_cancel). A serial job's queue is woken above.
create or replace function jobs_release_graphile_job() returns trigger language plpgsql as $$
begin
  if old.graphile_job_id is not null then perform graphile_worker.complete_jobs(array[old.graphile_job_id]); end if;
  perform graphile_worker.remove_job('j:' || old.id::text);
  return null;
end;
$$;
drop trigger if exists jobs_release_graphile_on_cancel on jobs;
drop trigger if exists jobs_release_graphile_on_delete on jobs;
create trigger jobs_release_graphile_on_cancel after update of status on jobs
  for each row when (old.status = 'queued' and new.status = 'cancelled' and (old.queue_name is null or old.seq is null))
  execute function jobs_release_graphile_job();
create trigger jobs_release_graphile_on_delete after delete on jobs
  for each row when (old.status in ('queued', 'running', 'cancelling') and (old.queue_name is null or old.seq is null))
  execute function jobs_release_graphile_job();

-- 10. Jobs added by triggers of the platform go through the one way in. ----------------
create or replace function partner_accounts_revoke_on_delete() returns trigger language plpgsql as $$
begin
  insert into partner_token_revocations (account_id, tenant_id, access_token_sealed, refresh_token_sealed)
  values (old.id, old.tenant_id, old.access_token_sealed, old.refresh_token_sealed)
  on conflict (account_id) do nothing;
  perform platform_enqueue(jsonb_build_array(jsonb_build_object('system', true, 'kind', 'partner.token-revocation',
    'payload', jsonb_build_object('accountId', old.id::text), 'key', 'partner-revocation:' || old.id::text, 'max_attempts', 8)));
  return case when tg_op = 'DELETE' then old end;
end;
$$;

-- 11. Counting a month's user messages needs no limits from its caller any more:
-- chat_send_round checks them itself after its insert.
create or replace function count_user_messages() returns trigger language plpgsql as $$
begin
  insert into tenant_message_counts (tenant_id, month, messages)
  select tenant_id, date_trunc('month', created_at at time zone 'UTC')::date, count(*)
  from inserted where role = 'user'
  group by 1, 2 order by 1, 2
  on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages + excluded.messages;
  return null;
end;
$$;

-- 12. A round of chat sends (core/chat/send.ts), in steps. ---------------------------------
-- What decides each send: its session, its month's message count, the
-- platform credits and provider keys its model needs, and an earlier send
-- with its Idempotency-Key. Read without locks, except with p_lock_first
-- (the round run again after a concurrent round took the month's room, or
-- inside a transaction block), which locks the tenants' counters first. Its
-- plan does not depend on the arguments (every lookup is an index probe per send).
create type chat_send_fact as (
  i integer, tenant_id uuid, session_id uuid, key text, fingerprint text, message_id uuid, content text,
  attachments jsonb, company_scope text, user_id uuid, job_id uuid, kind text, queue text, pool text, max_attempts integer,
  input jsonb, tenant_plan text, monthly_limit integer, found boolean, is_new boolean, first_refusal text,
  record_message_id uuid, record_job_id uuid, record_fingerprint text
);
create function chat_send_facts(p_sends jsonb, p_plan_limits jsonb, p_default_limit integer,
  p_credit_providers text[], p_default_model text, p_lock_first boolean)
returns chat_send_fact[]
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_facts chat_send_fact[];
begin
  with input as (
    select * from jsonb_to_recordset(p_sends) as r(i int, tenant_id uuid, session_id uuid, key text, fingerprint text,
      message_id uuid, content text, attachments jsonb, company_scope text, user_id uuid,
      job_id uuid, kind text, queue text, pool text, max_attempts integer, input jsonb)
  ), tenant_ids as (
    select distinct x.tenant_id from input x
  ), locked_counts as (
    -- The upsert's no-op update locks each row and returns the latest count,
    -- waiting for a concurrent round's commit. Without p_lock_first it selects nothing.
    insert into tenant_message_counts (tenant_id, month, messages)
    select k.tenant_id, date_trunc('month', now() at time zone 'UTC')::date, 0
    from tenant_ids k cross join lateral (select 1 from tenants t where t.id = k.tenant_id limit 1) t
    where p_lock_first order by 1
    on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages
    returning tenant_message_counts.tenant_id, tenant_message_counts.messages
  ), counts as (
    select l.tenant_id, l.messages from locked_counts l
    union all
    select k.tenant_id, c.messages from tenant_ids k
    cross join lateral (select c.messages from tenant_message_counts c
      where c.tenant_id = k.tenant_id and c.month = date_trunc('month', now() at time zone 'UTC')::date limit 1) c
    where not p_lock_first
  ), facts as (
    select x.*, t.plan as tenant_plan, coalesce(n.messages, 0) as used, s.id is not null as found,
      coalesce((p_plan_limits ->> t.plan)::int, p_default_limit) as monthly_limit,
      -- What '^([^/]+)/.' would capture: a name, a slash and something after it.
      case when strpos(coalesce(s.model, p_default_model), '/') > 1
        and length(coalesce(s.model, p_default_model)) > strpos(coalesce(s.model, p_default_model), '/')
        then split_part(coalesce(s.model, p_default_model), '/', 1) end as provider,
      h.id as record_message_id, h.turn_job_id as record_job_id, h.request_fingerprint as record_fingerprint
    from input x
    cross join lateral (select t.plan from tenants t where t.id = x.tenant_id limit 1) t
    left join counts n on n.tenant_id = x.tenant_id
    left join lateral (select s.id, coalesce(s.model, (select a.model from agents a where a.id = s.agent_id)) as model
      from chat_sessions s where s.id = x.session_id and s.tenant_id = x.tenant_id limit 1) s on true
    left join lateral (select m.id, m.turn_job_id, m.request_fingerprint from chat_messages m
      where m.tenant_id = x.tenant_id and m.idempotency_key = x.key limit 1) h on true
  ), keyed as (
    -- Whether the tenant brings its own key for the model's provider, and whether nobody has one.
    select f.*, own.found as own_key,
      f.provider = any(p_credit_providers) and not own.found
        and exists (select 1 from platform_provider_keys pk where pk.provider = f.provider and not pk.configured) as no_key
    from facts f
    cross join lateral (select exists (select 1 from provider_keys k where k.tenant_id = f.tenant_id and k.provider = f.provider) as found) own
  ), priced as (
    select f.*, f.found and f.record_message_id is null as is_new,
      f.provider = any(p_credit_providers) and not f.own_key and not f.no_key
        and coalesce((select c.balance_micros from tenant_credits c where c.tenant_id = f.tenant_id), 0) <= 0 as no_credit
    from keyed f
  ), decided as (
    -- New sends count in order; once the month's limit is reached every later one is refused.
    select p.*, case
      when not p.is_new then null
      when p.used + count(*) filter (where p.is_new and not p.no_credit and not p.no_key)
        over (partition by p.tenant_id order by p.i rows between unbounded preceding and 1 preceding) >= p.monthly_limit then 'MESSAGE_LIMIT_REACHED'
      when p.no_key then 'PROVIDER_KEY_MISSING'
      when p.no_credit then 'CREDITS_DEPLETED'
    end as first_refusal
    from priced p
  )
  select array_agg(row(d.i, d.tenant_id, d.session_id, d.key, d.fingerprint, d.message_id, d.content, d.attachments, d.company_scope,
    d.user_id, d.job_id, d.kind, d.queue, d.pool, d.max_attempts, d.input, d.tenant_plan, d.monthly_limit, d.found, d.is_new,
    d.first_refusal, d.record_message_id, d.record_job_id, d.record_fingerprint)::chat_send_fact order by d.i)
  into v_facts
  from decided d;
  return v_facts;
end;
$$;

-- One round of sends (their Idempotency-Keys distinct), one call: each
-- send's facts, then its account's room for unfinished jobs and its turn's
-- place in the fair order (platform_decide), then the messages and the turn
-- jobs of the sends it accepts (platform_write_jobs). A refused send writes
-- nothing. Read without locks, the month's count may have missed a
-- concurrent round: if the counts after this round's messages pass a
-- tenant's limit, the call fails with SQLSTATE QT001 and core/chat/send.ts
-- runs it again with p_lock_first.
create function chat_send_round(p_sends jsonb, p_plan_limits jsonb, p_default_limit integer,
  p_credit_providers text[], p_default_model text, p_lock_first boolean)
returns table (i integer, session_found boolean, created boolean, refusal text, plan text, message_limit integer,
  record_message_id uuid, record_job_id uuid, record_fingerprint text)
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
  v_facts chat_send_fact[];
  v_decided platform_decision[];
  v_created uuid[];
  v_over uuid;
begin
  v_facts := chat_send_facts(p_sends, p_plan_limits, p_default_limit, p_credit_providers, p_default_model, p_lock_first);
  select array_agg(d order by d.i) into v_decided
  from platform_decide(array(
    select row(f.i, f.job_id, f.tenant_id, f.kind, f.pool, f.queue, f.input, null, true, f.max_attempts, f.session_id, true, false, 0)::platform_job
    from unnest(v_facts) f where f.is_new and f.first_refusal is null order by f.i)) d;
  -- A key another api process wrote since this round began conflicts here:
  -- that send gets no message, and the caller reads the winner's.
  with inserted as (
    insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by,
      idempotency_key, request_fingerprint, turn_job_id)
    select f.message_id, f.tenant_id, f.session_id, 'user', f.content, f.attachments, f.company_scope, f.user_id,
      f.key, f.fingerprint, f.job_id
    from unnest(v_facts) f join unnest(v_decided) d on d.i = f.i
    where f.is_new and f.first_refusal is null and not d.refused order by f.i
    on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
    returning chat_messages.id
  )
  select coalesce(array_agg(id), '{}') into v_created from inserted;
  perform platform_write_jobs(array(
    select row(f.i, f.job_id, f.tenant_id, f.kind, f.pool, f.queue, f.input, d.run_at, true, f.max_attempts, f.session_id, true, false, 0)::platform_job
    from unnest(v_facts) f join unnest(v_decided) d on d.i = f.i where f.message_id = any(v_created) order by f.i));
  if not p_lock_first then
    select c.tenant_id into v_over
    from (select distinct f.tenant_id, f.monthly_limit from unnest(v_facts) f where f.message_id = any(v_created)) x
    join tenant_message_counts c on c.tenant_id = x.tenant_id and c.month = date_trunc('month', now() at time zone 'UTC')::date
    where c.messages > x.monthly_limit limit 1;
    if v_over is not null then
      raise exception 'a concurrent send reached the monthly message limit of tenant %', v_over
        using errcode = 'QT001', hint = 'decide the quota again with the counter locked';
    end if;
  end if;
  return query
  select f.i, f.found, f.message_id = any(v_created),
    case when d.refused then 'QUEUE_LIMIT_REACHED' else f.first_refusal end,
    case when d.refused then d.plan else f.tenant_plan end,
    case when d.refused then d.max_open else f.monthly_limit end,
    f.record_message_id, f.record_job_id, f.record_fingerprint
  from unnest(v_facts) f left join unnest(v_decided) d on d.i = f.i
  order by f.i;
end;
$$;

-- 13. A safety net: unfinished jobs whose wake-up is gone (a Graphile job
-- that used up its attempts, or one completed by a worker that had lost it
-- while another ran it) are woken again. The dead-worker sweep calls it and
-- logs what it woke; normally nothing.
create function jobs_rewake_orphans() returns integer language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_jobs uuid[];
  v_queues text[];
  v_id uuid;
begin
  select array_agg(j.id) into v_jobs from jobs j
  where j.status = 'queued' and (j.queue_name is null or j.seq is null) and j.updated_at < now() - interval '5 seconds'
    and not exists (select 1 from graphile_worker.jobs g where g.id = j.graphile_job_id and (g.locked_at is not null or g.attempts < g.max_attempts))
    and not exists (select 1 from graphile_worker.jobs g where g.key = 'j:' || j.id::text and (g.locked_at is not null or g.attempts < g.max_attempts));
  foreach v_id in array coalesce(v_jobs, '{}'::uuid[]) loop
    perform job_wake(v_id, coalesce((select not_before from jobs where id = v_id), now()));
  end loop;
  select array_agg(h.queue_name) into v_queues from (
    select distinct on (j.queue_name) j.queue_name, j.status, j.updated_at from jobs j
    where j.queue_name is not null and j.seq is not null and j.status in ('queued', 'running', 'cancelling') order by j.queue_name, j.seq) h
  where h.status = 'queued' and h.updated_at < now() - interval '5 seconds'
    and not exists (select 1 from graphile_worker.jobs g where g.key = 'q:' || h.queue_name and (g.locked_at is not null or g.attempts < g.max_attempts));
  if v_queues is not null then perform queue_wake(v_queues); end if;
  return coalesce(cardinality(v_jobs), 0) + coalesce(cardinality(v_queues), 0);
end;
$$;

-- 14. When each schedule last ran (one row per cron item, written as each run
-- starts): the console shows it and the soak checks that every minute fired,
-- without reading Graphile Worker's own record of it.
create table scheduled_job_last_runs (
  identifier text primary key,
  task text not null,
  scheduled_for timestamptz,
  started_at timestamptz not null
);
