-- Fair sharing of the workers by account (issue 31).
--
-- 1. Every workspace belongs to an account: the person who owns it (who
--    created it, or claimed it from an agent), or, for a workspace nobody
--    owns yet, the workspace itself. Fairness and quotas count by account,
--    so fifty workspaces of one person weigh as much as one.
-- 2. plan_limits: per plan, the weight of an account's jobs in the fair
--    order, and how many workspaces and unfinished jobs an account may have.
--    Processes write their configured values at start (core/jobs/plan-limits.ts).
-- 3. Fair order (start-time fair queueing on Graphile's run_at): every job
--    gets a start tag, written as its run_at. A job's tag is
--    greatest(its account's virtual time, the pool's service position);
--    the account's virtual time then moves on by 16 µs / weight per job.
--    Graphile Worker fetches by run_at, so it starts jobs by tag: a quiet
--    account's job goes to the head of the queue, and backlogged accounts
--    take turns in proportion to their weights. The service position of a
--    pool is the latest tag a worker started (workers publish it,
--    workers/fair-clock.ts). A tag is never later than now(), so no job
--    waits for its tag: the order decides, never a delay.
-- 4. account_open_jobs: jobs not yet final per account, kept by triggers on
--    jobs, for the quota of unfinished jobs.
-- 5. Parked jobs (core/jobs/park.ts): a job that waits (a retry's backoff, a
--    Retry-After) gives its worker slot back but keeps its place: it stays
--    in Graphile's table, locked by 'platform:parked' until its time, and so
--    does its named queue (a chat session's later turns wait for it).

-- 1. Accounts -----------------------------------------------------------------
alter table tenants add column owner_id uuid references users (id) on delete set null;
update tenants set owner_id = created_by;
alter table tenants add column account_id uuid generated always as (coalesce(owner_id, id)) stored;
create index tenants_account_idx on tenants (account_id);

-- 2. Plan limits --------------------------------------------------------------
create table plan_limits (
  plan text primary key check (plan in ('free', 'pro', 'enterprise')),
  fair_weight real not null check (fair_weight > 0 and fair_weight <= 1000),
  max_workspaces integer not null check (max_workspaces >= 1),
  max_open_jobs integer not null check (max_open_jobs >= 1)
);
insert into plan_limits (plan, fair_weight, max_workspaces, max_open_jobs) values
  ('free', 1, 3, 200), ('pro', 4, 20, 5000), ('enterprise', 16, 50, 50000);

-- The best limits among an account's workspaces (an account with one Pro
-- workspace has Pro limits).
create function account_limits(p_account uuid) returns plan_limits
language sql stable as $$
  select l.* from tenants t join plan_limits l on l.plan = t.plan
  where t.account_id = p_account
  order by l.max_open_jobs desc, l.max_workspaces desc limit 1
$$;

-- 3. Fair order ----------------------------------------------------------------
create table fair_clock (
  pool text primary key check (length(pool) between 1 and 40),
  vtime timestamptz not null
);

create table fair_accounts (
  account_id uuid not null,
  pool text not null check (length(pool) between 1 and 40),
  vtime timestamptz not null,
  -- What its last enqueue charged (µs of virtual time): the jobs it added over their weight.
  last_charge_us double precision not null default 0,
  primary key (account_id, pool)
);

-- Start tags for new jobs: one per (tenant, pool) pair given, in order. Each
-- account's virtual time moves on once per call, in one statement that
-- locks the rows in key order (concurrent enqueues cannot deadlock on them).
-- A new account starts at the pool's position; a known one at the later of
-- its own time and the position (no credit is saved while idle). The
-- position is never later than now(), and an account's time never more than
-- a second ahead of now().
create function fair_run_at(p_tenants uuid[], p_pools text[])
returns table (i bigint, run_at timestamptz)
language sql volatile as $$
  with input as (
    select x.i, x.pool, t.account_id, 16.0 / coalesce(l.fair_weight, 1) as step_us
    from unnest(p_tenants, p_pools) with ordinality as x(tenant_id, pool, i)
    join tenants t on t.id = x.tenant_id
    left join plan_limits l on l.plan = t.plan
  ), per_key as (
    select k.account_id, k.pool, sum(k.step_us) as total_us,
      least(now(), coalesce((select c.vtime from fair_clock c where c.pool = k.pool),
        -- Before a worker of the pool started anything: the head of the queue.
        (select j.run_at from graphile_worker._private_jobs j where j.is_available order by j.priority, j.run_at limit 1),
        now())) as position
    from input k group by k.account_id, k.pool
  ), moved as (
    insert into fair_accounts as f (account_id, pool, vtime, last_charge_us)
    select p.account_id, p.pool, p.position + p.total_us * interval '1 microsecond', p.total_us
    from per_key p order by p.account_id, p.pool
    on conflict (account_id, pool) do update
      set vtime = least(greatest(f.vtime + excluded.last_charge_us * interval '1 microsecond', excluded.vtime), now() + interval '1 second'),
        last_charge_us = excluded.last_charge_us
    returning f.account_id, f.pool, f.vtime - f.last_charge_us * interval '1 microsecond' as start
  )
  select k.i, least(m.start + (sum(k.step_us) over (partition by k.account_id, k.pool order by k.i) - k.step_us) * interval '1 microsecond', now())
  from input k join moved m on m.account_id = k.account_id and m.pool = k.pool
  order by k.i
$$;

-- 4. Unfinished jobs per account -------------------------------------------------
-- New jobs are added to account_open_jobs as they are enqueued (the enqueue
-- holds the account's row anyway, for the fair order); jobs that end are
-- appended to account_open_job_drops without taking any lock, so a worker
-- finishing many jobs of one account never waits on its row, and folded in
-- every second or so by a worker (fold_open_job_drops). The count is
-- account_open_jobs.open minus the account's drops not yet folded.
create table account_open_jobs (
  account_id uuid primary key,
  open integer not null default 0
);
create table account_open_job_drops (
  account_id uuid not null,
  n integer not null
);
create index account_open_job_drops_account_idx on account_open_job_drops (account_id);

create function job_is_open(status text) returns boolean language sql immutable parallel safe as $$
  select status in ('queued', 'running', 'cancelling')
$$;

/* The account's unfinished jobs (its row need not be locked). */
create function account_open_count(p_account uuid) returns integer language sql stable as $$
  select greatest(0, coalesce((select o.open from account_open_jobs o where o.account_id = p_account), 0)
    - coalesce((select sum(d.n) from account_open_job_drops d where d.account_id = p_account), 0))::int
$$;

-- Adds `delta` per account, rows locked in key order.
create function account_open_jobs_add(p_accounts uuid[], p_deltas integer[]) returns void
language sql volatile as $$
  insert into account_open_jobs as a (account_id, open)
  select d.account_id, sum(d.delta) from unnest(p_accounts, p_deltas) as d(account_id, delta)
  where d.account_id is not null group by d.account_id having sum(d.delta) <> 0 order by d.account_id
  on conflict (account_id) do update set open = a.open + excluded.open
$$;

create function jobs_count_open_inserted() returns trigger language plpgsql as $$
begin
  perform account_open_jobs_add(array_agg(c.account_id), array_agg(c.n))
  from (select t.account_id, count(*)::int as n from new_jobs n join tenants t on t.id = n.tenant_id
        where job_is_open(n.status) group by t.account_id) c;
  return null;
end;
$$;
create trigger jobs_count_open_inserted after insert on jobs
  referencing new table as new_jobs for each statement execute function jobs_count_open_inserted();

create function jobs_count_open_finished() returns trigger language plpgsql as $$
begin
  insert into account_open_job_drops (account_id, n) select t.account_id, 1 from tenants t where t.id = new.tenant_id;
  return null;
end;
$$;
create trigger jobs_count_open_finished after update of status on jobs
  for each row when (job_is_open(old.status) and not job_is_open(new.status))
  execute function jobs_count_open_finished();

-- A tenant deleted with its jobs: its open ones leave its account first (the
-- cascade deletes the jobs after the tenant row, when its account is no
-- longer known). Jobs deleted otherwise are counted out here.
create function jobs_count_open_deleted() returns trigger language plpgsql as $$
begin
  insert into account_open_job_drops (account_id, n) select t.account_id, 1 from tenants t where t.id = old.tenant_id;
  return null;
end;
$$;
create trigger jobs_count_open_deleted after delete on jobs
  for each row when (job_is_open(old.status)) execute function jobs_count_open_deleted();

create function tenants_move_open_jobs() returns trigger language plpgsql as $$
declare
  n integer;
begin
  select count(*)::int into n from jobs where tenant_id = old.id and job_is_open(status);
  if n > 0 and tg_op = 'DELETE' then
    insert into account_open_job_drops (account_id, n) values (old.account_id, n);
  elsif n > 0 and old.account_id is distinct from new.account_id then
    insert into account_open_job_drops (account_id, n) values (old.account_id, n);
    perform account_open_jobs_add(array[new.account_id], array[n]);
  end if;
  -- A BEFORE DELETE trigger lets the delete go on by returning the row.
  return case when tg_op = 'DELETE' then old end;
end;
$$;
create trigger tenants_open_jobs_on_delete before delete on tenants
  for each row execute function tenants_move_open_jobs();
create trigger tenants_open_jobs_on_owner after update of owner_id on tenants
  for each row when (old.owner_id is distinct from new.owner_id) execute function tenants_move_open_jobs();

insert into account_open_jobs (account_id, open)
select t.account_id, count(*) from jobs j join tenants t on t.id = j.tenant_id
where job_is_open(j.status) group by t.account_id;

-- Subtracts the drops appended so far (workers call it every second or so);
-- how many accounts changed. Rows locked in key order.
create function fold_open_job_drops() returns integer language plpgsql as $$
declare
  r record;
  changed integer := 0;
begin
  for r in
    with gone as (delete from account_open_job_drops returning account_id, n)
    select account_id, sum(n)::int as n from gone group by account_id order by account_id
  loop
    update account_open_jobs set open = greatest(0, open - r.n) where account_id = r.account_id;
    changed := changed + 1;
  end loop;
  return changed;
end;
$$;

-- Room for new jobs that count against the accounts' limits (one tenant id
-- per new job): the counters are locked in key order and read, and an
-- account that would go over its plan's limit of unfinished jobs fails the
-- statement with SQLSTATE QJ001, the numbers in the detail
-- (core/jobs/quota.ts turns it into a refusal). Concurrent enqueues of one
-- account wait for each other here, so the limit is exact.
create function check_open_job_room(p_tenants uuid[]) returns void
language plpgsql volatile as $$
declare
  r record;
begin
  if coalesce(cardinality(p_tenants), 0) = 0 then return; end if;
  for r in
    with wanted as (
      select t.account_id, count(*)::int as n from unnest(p_tenants) as x(tenant_id) join tenants t on t.id = x.tenant_id group by t.account_id
    ), locked as (
      insert into account_open_jobs as a (account_id, open)
      select w.account_id, 0 from wanted w order by w.account_id
      on conflict (account_id) do update set open = a.open
      returning a.account_id, a.open
    )
    select w.account_id, greatest(0, l.open - coalesce((select sum(d.n) from account_open_job_drops d where d.account_id = w.account_id), 0))::int as open,
      w.n, (account_limits(w.account_id)).*
    from wanted w join locked l on l.account_id = w.account_id
  loop
    if r.max_open_jobs is not null and r.open + r.n > r.max_open_jobs then
      raise exception 'the account has % unfinished jobs; its % plan allows %', r.open, r.plan, r.max_open_jobs
        using errcode = 'QJ001', detail = json_build_object('plan', r.plan, 'limit', r.max_open_jobs, 'open', r.open)::text;
    end if;
  end loop;
end;
$$;

-- 5. Parked jobs -------------------------------------------------------------------
-- Only parked rows are in this index: the wake-up finds due ones without
-- reading the queue.
create index platform_parked_jobs on graphile_worker._private_jobs (locked_at) where locked_by = 'platform:parked';

-- Wakes parked jobs whose time has come: unlocked with their run_at (their
-- place in the fair order) unchanged, their queues unlocked, and Graphile's
-- workers told there is work. Returns how many.
create function wake_parked_jobs() returns integer
language plpgsql as $$
declare
  woken integer;
begin
  with due as (
    update graphile_worker._private_jobs set locked_by = null, locked_at = null
    where locked_by = 'platform:parked' and locked_at <= now()
    returning job_queue_id
  ), queues as (
    update graphile_worker._private_job_queues q set locked_by = null, locked_at = null
    where q.id in (select job_queue_id from due) and q.locked_by = 'platform:parked'
    returning 1
  )
  select count(*)::int into woken from due;
  if woken > 0 then
    perform pg_notify('jobs:insert', json_build_object('count', woken, 'woken', txid_current())::text);
  end if;
  return woken;
end;
$$;

-- A cancelled or deleted job leaves Graphile's queue (0028); a parked one too,
-- and the queue it held is let go.
create or replace function jobs_release_graphile_job() returns trigger language plpgsql as $$
begin
  -- complete_jobs() leaves locked jobs alone: those are running.
  perform graphile_worker.complete_jobs(array[old.graphile_job_id]);
  with gone as (
    delete from graphile_worker._private_jobs where id = old.graphile_job_id and locked_by = 'platform:parked'
    returning job_queue_id
  )
  update graphile_worker._private_job_queues q set locked_by = null, locked_at = null
  where q.id in (select job_queue_id from gone) and q.locked_by = 'platform:parked';
  return null;
end;
$$;

-- A Graphile job let go without running (a batch a stopping worker gave back,
-- a dead worker's jobs, a woken parked job) whose platform job was cancelled
-- or deleted meanwhile leaves the queue: a first attempt starts without
-- reading its job (0028), so it must not be picked up again. A cancel found
-- it locked then (held in a worker's batch), so it could not take it out.
create function graphile_drop_finished_on_unlock() returns trigger language plpgsql as $$
begin
  if new.payload ->> 'jobId' is not null and not exists (
    select 1 from jobs j where j.id = (new.payload ->> 'jobId')::uuid and job_is_open(j.status)
  ) then
    delete from graphile_worker._private_jobs where id = new.id;
  end if;
  return null;
end;
$$;
create trigger platform_drop_finished_on_unlock
  after update of locked_at on graphile_worker._private_jobs
  for each row when (old.locked_at is not null and new.locked_at is null)
  execute function graphile_drop_finished_on_unlock();
