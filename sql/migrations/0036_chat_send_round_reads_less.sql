-- A chat send round reads less: each send names its turn job's payload and
-- tenant flag, and the round takes the job's task, queue and attempts from
-- the send's own fields (kind, queue_name, max_attempts), instead of a second
-- copy of them in a Graphile job spec per send. The provider of the
-- session's model is the part before its first "/", found without a regular
-- expression. Profiled on one connection (perf, rounds of 16 sends), parsing
-- the round's JSON argument took about 6 % of the backend's time and the
-- regular expression about 4 %.
--
-- What the round writes is unchanged: the rows add_jobs() writes for specs
-- without a job_key (test/core/chat/send-graphile-jobs.test.ts), run_at now()
-- and priority 0 as add_jobs() defaults them (a turn sets neither).

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
      job_id uuid, kind text, queue_name text, max_attempts integer, payload jsonb, flag text)
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
  ), priced as (
    select f.*, f.found and f.record_message_id is null as is_new,
      f.provider = any(p_credit_providers)
        and not exists (select 1 from provider_keys k where k.tenant_id = f.tenant_id and k.provider = f.provider)
        and coalesce((select c.balance_micros from tenant_credits c where c.tenant_id = f.tenant_id), 0) <= 0 as no_credit
    from facts f
  ), decided as (
    -- New sends count in order; once the limit is reached every later one is refused.
    select p.*, case
      when not p.is_new then null
      when p.used + count(*) filter (where p.is_new and not p.no_credit)
        over (partition by p.tenant_id order by p.i rows between unbounded preceding and 1 preceding) >= p.monthly_limit then 'MESSAGE_LIMIT_REACHED'
      when p.no_credit then 'CREDITS_DEPLETED'
    end as refused
    from priced p
  ), guard as (
    select case when p_lock_first then '' else set_config('platform.message_limits',
      coalesce((select jsonb_object_agg(y.tenant_id, y.monthly_limit) from (select distinct d.tenant_id, d.monthly_limit from decided d) y), '{}')::text,
      true) end as limits
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
  ), added as (
    -- The turn jobs, written into Graphile Worker's table as its add_jobs()
    -- writes jobs without a job_key (see the top of 0035).
    insert into graphile_worker._private_jobs (job_queue_id, task_id, payload, run_at, max_attempts, priority, flags)
    select q.id, k.id, d.payload, now(), d.max_attempts, 0, jsonb_build_object(d.flag, true)
    from decided d
    cross join lateral (select k.id from graphile_worker._private_tasks k where k.identifier = d.kind limit 1) k
    left join lateral (select q.id from graphile_worker._private_job_queues q where q.queue_name = d.queue_name limit 1) q on true
    where d.message_id in (select m.id from message m)
    order by d.i
    returning graphile_worker._private_jobs.id, graphile_worker._private_jobs.job_queue_id,
      (graphile_worker._private_jobs.payload ->> 'jobId')::uuid as job_id
  ), queued as (
    insert into jobs (id, tenant_id, kind, queue_name, max_attempts, session_id, graphile_job_id)
    select d.job_id, d.tenant_id, d.kind, d.queue_name, d.max_attempts, d.session_id, a.id
    from decided d join added a on a.job_id = d.job_id
    returning 1
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
    d.refused, d.tenant_plan, d.monthly_limit, d.record_message_id, d.record_job_id, d.record_fingerprint
  from input x left join decided d on d.i = x.i cross join guard left join announced on true;

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
