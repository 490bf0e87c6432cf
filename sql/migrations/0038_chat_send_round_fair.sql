-- A chat send round (0036) in the fair order and within the account's limit
-- of unfinished jobs (0037):
-- - each accepted turn gets its start tag in its pool's fair order as its
--   run_at (fair_run_at), with the Graphile flag that says so;
-- - a new send whose account would go over its plan's limit of unfinished
--   jobs is refused with QUEUE_LIMIT_REACHED (nothing written; plan and
--   message_limit then name the account's plan and that limit);
-- - a new send whose model no key can serve (the tenant has none of its own
--   and the platform's workers have none) is refused with PROVIDER_KEY_MISSING
--   at once, instead of a turn that fails (platform_provider_keys, below);
-- - the round adds its turns to the accounts' counts itself, in its one
--   statement (the jobs insert trigger leaves them alone: platform.jobs_counted).
--   The counts are read without a lock, as the message counter is: if a
--   concurrent round took the room meanwhile, the round's own count finds
--   the account over its limit and fails the statement with QT001, and the
--   round runs again with the counters locked first.

-- Which keyed providers the platform itself has a key for, as the worker
-- processes (which call the providers) see their configuration: each writes
-- it at start (core/provider-keys/platform.ts). No row: not known yet, and
-- nothing is refused for it.
create table platform_provider_keys (
  provider text primary key,
  configured boolean not null,
  updated_at timestamptz not null default now()
);

create or replace function jobs_count_open_inserted() returns trigger language plpgsql as $$
begin
  -- A chat send round counts its own turns (chat_send_round, below).
  if current_setting('platform.jobs_counted', true) = 'on' then return null; end if;
  perform account_open_jobs_add(array_agg(c.account_id), array_agg(c.n))
  from (select t.account_id, count(*)::int as n from new_jobs n join tenants t on t.id = n.tenant_id
        where job_is_open(n.status) group by t.account_id) c;
  return null;
end;
$$;

-- Fails the statement: a concurrent send round took the room this one counted on.
create function chat_send_quota_race(p_account uuid) returns boolean language plpgsql as $$
begin
  raise exception 'a concurrent send reached the unfinished-jobs limit of account %', p_account
    using errcode = 'QT001', hint = 'decide the quota again with the counters locked';
end;
$$;

create or replace function chat_send_round(
  p_sends jsonb,
  p_plan_limits jsonb,
  p_default_limit integer,
  p_credit_providers text[],
  p_default_model text,
  p_lock_first boolean
) returns table (i integer, session_found boolean, created boolean, refusal text, plan text, message_limit integer,
  record_message_id uuid, record_job_id uuid, record_fingerprint text)
language plpgsql
set plan_cache_mode = force_generic_plan -- the plan does not depend on the arguments (see 0032)
as $$
#variable_conflict use_column
declare
  v_queueless jsonb;
begin
  -- The idle-queue sweep (core/jobs/idle-queues.ts) waits for this round's
  -- commit: its turns name queue rows it would otherwise delete.
  lock table graphile_worker._private_job_queues in row share mode;
  -- The task row, should something have deleted it since (it is never
  -- written when it is there).
  insert into graphile_worker._private_tasks (identifier)
  select distinct s ->> 'kind' from jsonb_array_elements(p_sends) s
  where not exists (select 1 from graphile_worker._private_tasks k where k.identifier = s ->> 'kind')
  on conflict do nothing;
  return query
  with input as (
    select * from jsonb_to_recordset(p_sends) as r(i int, tenant_id uuid, session_id uuid, key text, fingerprint text,
      message_id uuid, content text, attachments jsonb, company_scope text, user_id uuid,
      job_id uuid, kind text, queue_name text, max_attempts integer, payload jsonb, flag text, pool text)
  ), tenant_ids as (
    -- Every lookup below is a LATERAL ... LIMIT 1: an index probe per send,
    -- whatever the planner believes of the tables' sizes.
    select distinct x.tenant_id from input x
  ), locked_counts as (
    -- The upsert's no-op update locks each row and returns the latest count,
    -- waiting for a concurrent batch's commit. Without p_lock_first it selects nothing.
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
  ), account_ids as (
    select distinct t.account_id from tenant_ids k cross join lateral (select t.account_id from tenants t where t.id = k.tenant_id limit 1) t
  ), locked_open as (
    -- Each account's unfinished jobs (0037): locked in key order first when
    -- the round runs again after a race, read without a lock otherwise.
    select o.account_id from account_open_jobs o
    where p_lock_first and o.account_id in (select a.account_id from account_ids a) order by 1 for update
  ), opens as (
    select a.account_id, account_open_count(a.account_id) as open
    from account_ids a where (select count(*) from locked_open) >= 0
  ), accounts as (
    select o.account_id, o.open, lim.max_open_jobs as max_open, lim.plan as limit_plan
    from opens o cross join lateral account_limits(o.account_id) lim
  ), facts as (
    select x.*, t.plan as tenant_plan, t.account_id, coalesce(n.messages, 0) as used, s.id is not null as found,
      coalesce((p_plan_limits ->> t.plan)::int, p_default_limit) as monthly_limit,
      -- What '^([^/]+)/.' would capture: a name, a slash and something after it.
      case when strpos(coalesce(s.model, p_default_model), '/') > 1
        and length(coalesce(s.model, p_default_model)) > strpos(coalesce(s.model, p_default_model), '/')
        then split_part(coalesce(s.model, p_default_model), '/', 1) end as provider,
      h.id as record_message_id, h.turn_job_id as record_job_id, h.request_fingerprint as record_fingerprint
    from input x
    cross join lateral (select t.plan, t.account_id from tenants t where t.id = x.tenant_id limit 1) t
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
  ), limited as (
    -- New sends count in order; once the limit is reached every later one is refused.
    select p.*, case
      when not p.is_new then null
      when p.used + count(*) filter (where p.is_new and not p.no_credit and not p.no_key)
        over (partition by p.tenant_id order by p.i rows between unbounded preceding and 1 preceding) >= p.monthly_limit then 'MESSAGE_LIMIT_REACHED'
      when p.no_key then 'PROVIDER_KEY_MISSING'
      when p.no_credit then 'CREDITS_DEPLETED'
    end as first_refusal
    from priced p
  ), decided as (
    -- Then each account's room for unfinished jobs, in the same order.
    select l.*, a.open as account_open, a.max_open, a.limit_plan, case
      when l.first_refusal is not null or not l.is_new then l.first_refusal
      when a.max_open is not null and a.open + count(*) filter (where l.is_new and l.first_refusal is null)
        over (partition by l.account_id order by l.i rows between unbounded preceding and 1 preceding) >= a.max_open then 'QUEUE_LIMIT_REACHED'
    end as refused
    from limited l left join accounts a on a.account_id = l.account_id
  ), guard as (
    select case when p_lock_first then '' else set_config('platform.message_limits',
      coalesce((select jsonb_object_agg(y.tenant_id, y.monthly_limit) from (select distinct d.tenant_id, d.monthly_limit from decided d) y), '{}')::text,
      true) end || set_config('platform.jobs_counted', 'on', true) as limits
  ), message as (
    -- A key another api process wrote since this statement began conflicts
    -- here: that send gets no message, and the caller reads the winner's.
    insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by,
      idempotency_key, request_fingerprint, turn_job_id)
    select d.message_id, d.tenant_id, d.session_id, 'user', d.content, d.attachments, d.company_scope, d.user_id,
      d.key, d.fingerprint, d.job_id
    from decided d where d.is_new and d.refused is null
    on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
    returning chat_messages.id
  ), accepted as (
    select d.i, d.tenant_id, d.pool, row_number() over (order by d.i) as n
    from decided d where d.message_id in (select m.id from message m)
  ), tags as (
    -- Each accepted turn's start tag in its pool's fair order (0037).
    select a.i, f.run_at from fair_run_at(
      array(select a.tenant_id from accepted a order by a.n), array(select a.pool from accepted a order by a.n)) f
    join accepted a on a.n = f.i
  ), added as (
    -- The turn jobs, written into Graphile Worker's table as its add_jobs()
    -- writes jobs without a job_key (see the top of 0035), at their fair start tags.
    insert into graphile_worker._private_jobs (job_queue_id, task_id, payload, run_at, max_attempts, priority, flags)
    select q.id, k.id, d.payload, coalesce(g.run_at, now()), d.max_attempts, 0, jsonb_build_object(d.flag, true)
    from decided d
    join tags g on g.i = d.i
    cross join lateral (select k.id from graphile_worker._private_tasks k where k.identifier = d.kind limit 1) k
    left join lateral (select q.id from graphile_worker._private_job_queues q where q.queue_name = d.queue_name limit 1) q on true
    order by d.i
    returning graphile_worker._private_jobs.id, graphile_worker._private_jobs.job_queue_id,
      (graphile_worker._private_jobs.payload ->> 'jobId')::uuid as job_id
  ), queued as (
    insert into jobs (id, tenant_id, kind, queue_name, max_attempts, session_id, graphile_job_id)
    select d.job_id, d.tenant_id, d.kind, d.queue_name, d.max_attempts, d.session_id, a.id
    from decided d join added a on a.job_id = d.job_id
    returning 1
  ), counted as (
    -- The accepted turns join their accounts' counts (rows locked in key order).
    insert into account_open_jobs as o (account_id, open)
    select d.account_id, count(*)::int from decided d join added a on a.job_id = d.job_id group by d.account_id order by d.account_id
    on conflict (account_id) do update set open = o.open + excluded.open
    returning o.account_id, o.open
  ), raced as (
    -- Read without a lock, the count may have missed a concurrent round's turns.
    select chat_send_quota_race(c.account_id) from counted c join accounts a on a.account_id = c.account_id
    where not p_lock_first and a.max_open is not null
      and c.open - coalesce((select sum(x.n) from account_open_job_drops x where x.account_id = c.account_id), 0) > a.max_open
  ), announced as (
    -- Graphile Worker's "new jobs" notification, once per round that added
    -- any (the payload names the round's first job: PostgreSQL merges equal
    -- payloads within a transaction, and a channel's batch may run rounds in
    -- one), and the jobs whose queue row is still to be made (below).
    select pg_notify('jobs:insert', json_build_object('count', count(*), 'first', min(a.id))::text) as sent,
      set_config('platform.queueless_jobs', coalesce(jsonb_agg(jsonb_build_object('id', a.id, 'queue', d.queue_name))
        filter (where a.job_queue_id is null and d.queue_name is not null), '[]')::text, true) as queueless
    from added a join decided d on d.job_id = a.job_id having count(*) > 0
  )
  select x.i, coalesce(d.found, false), exists (select 1 from message m where m.id = x.message_id),
    d.refused, case when d.refused = 'QUEUE_LIMIT_REACHED' then d.limit_plan else d.tenant_plan end,
    case when d.refused = 'QUEUE_LIMIT_REACHED' then d.max_open else d.monthly_limit end,
    d.record_message_id, d.record_job_id, d.record_fingerprint
  from input x left join decided d on d.i = x.i cross join guard left join announced on true
  where (select count(*) from raced) >= 0;
  perform set_config('platform.jobs_counted', '', true);

  -- A session's first turn: its queue row, then the job in it (a statement
  -- each, so the second sees the row even if another send made it first).
  v_queueless := nullif(current_setting('platform.queueless_jobs', true), '')::jsonb;
  if jsonb_array_length(coalesce(v_queueless, '[]')) > 0 then
    perform set_config('platform.queueless_jobs', '', true);
    insert into graphile_worker._private_job_queues (queue_name)
    select distinct e ->> 'queue' from jsonb_array_elements(v_queueless) e order by 1
    on conflict do nothing;
    update graphile_worker._private_jobs j set job_queue_id = q.id
    from jsonb_array_elements(v_queueless) e join graphile_worker._private_job_queues q on q.queue_name = e ->> 'queue'
    where j.id = (e ->> 'id')::bigint;
  end if;
end;
$$;
