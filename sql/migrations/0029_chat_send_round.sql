-- A round of chat sends (core/chat/send.ts) is one call of chat_send_round
-- below: a function, so its plan is made once per connection instead of on
-- every batch (planning the statement cost about 2 ms, more than running it).
--
-- The chat send decides its quota from the counter it reads without a lock,
-- so two batches of one tenant no longer wait for each other from their
-- first statement to their commit. This trigger, which adds the new user
-- messages to the counter (and so locks the row until commit, after any
-- concurrent batch committed), then checks what the send decided: when the
-- statement set `platform.message_limits` (tenant id -> monthly limit) and a
-- tenant's count now exceeds it, a concurrent send took the room, and the
-- statement fails with SQLSTATE QT001. The send then decides again, locking
-- the counter first (core/chat/send.ts). Inserts that set no limits are
-- counted as before.
create or replace function count_user_messages() returns trigger language plpgsql as $$
declare
  limits jsonb := nullif(current_setting('platform.message_limits', true), '')::jsonb;
  over_tenant uuid;
begin
  with bumped as (
    insert into tenant_message_counts (tenant_id, month, messages)
    select tenant_id, date_trunc('month', created_at at time zone 'UTC')::date, count(*)
    from inserted where role = 'user'
    group by 1, 2
    on conflict (tenant_id, month) do update set messages = tenant_message_counts.messages + excluded.messages
    returning tenant_id, messages
  )
  select b.tenant_id into over_tenant from bumped b
  where limits is not null and b.messages > (limits ->> b.tenant_id::text)::bigint
  limit 1;
  if over_tenant is not null then
    raise exception 'a concurrent send reached the monthly message limit of tenant %', over_tenant
      using errcode = 'QT001', hint = 'decide the quota again with the counter locked';
  end if;
  return null;
end;
$$;

-- One round of sends (their idempotency keys distinct): the quota of each,
-- then the idempotency record, the message and the turn job of those it
-- accepts, in one statement. The caller passes what lives in code: the plans'
-- monthly limits, the providers whose models spend credits, the default model.
-- p_lock_first: lock the tenants' counter rows (in sorted order) before
-- reading them, instead of reading without a lock and letting the trigger
-- above check (the retry after QT001, and inside a transaction block).
create function chat_send_round(
  p_sends jsonb,
  p_turn_specs json,
  p_turn_jobs jsonb,
  p_scope text,
  p_plan_limits jsonb,
  p_default_limit integer,
  p_credit_providers text[],
  p_default_model text,
  p_lock_first boolean
) returns table (i integer, session_found boolean, created boolean, refusal text, plan text, message_limit integer)
language plpgsql as $$
#variable_conflict use_column
begin
  return query
  with input as (
    select * from jsonb_to_recordset(p_sends) as r(i int, tenant_id uuid, session_id uuid, key text,
      fingerprint text, message_id uuid, body jsonb, content text, attachments jsonb, company_scope text, user_id uuid)
  ), tenant_ids as (
    -- Every lookup below is a LATERAL ... LIMIT 1: an index probe per send,
    -- whatever the planner believes of the tables' sizes (a hash join would
    -- scan a whole table, and its cost would grow with it).
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
      substring(coalesce(s.model, p_default_model) from '^([^/]+)/.') as provider,
      h.found is not null as has_record
    from input x
    cross join lateral (select t.plan from tenants t where t.id = x.tenant_id limit 1) t
    left join counts n on n.tenant_id = x.tenant_id
    left join lateral (select s.id, coalesce(s.model, (select a.model from agents a where a.id = s.agent_id)) as model
      from chat_sessions s where s.id = x.session_id and s.tenant_id = x.tenant_id limit 1) s on true
    left join lateral (select true as found from idempotency_records r
      where r.scope = p_scope and r.tenant_id = x.tenant_id and r.key = x.key and r.expires_at > now() limit 1) h on true
  ), priced as (
    select f.*, f.found and not f.has_record as is_new,
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
  ), claim as (
    insert into idempotency_records (scope, tenant_id, key, fingerprint, state, response_status, response_body)
    select p_scope, d.tenant_id, d.key, d.fingerprint, 'completed', 202, d.body from decided d where d.found and d.refused is null
    on conflict (scope, tenant_id, key) do update
      set fingerprint = excluded.fingerprint, state = excluded.state, response_status = excluded.response_status,
          response_body = excluded.response_body, created_at = now(), expires_at = now() + interval '24 hours'
      where idempotency_records.expires_at <= now()
    returning idempotency_records.tenant_id, idempotency_records.key
  ), message as (
    insert into chat_messages (id, tenant_id, session_id, role, content, attachments, company_scope, created_by)
    select d.message_id, d.tenant_id, d.session_id, 'user', d.content, d.attachments, d.company_scope, d.user_id
    from decided d join claim c on c.tenant_id = d.tenant_id and c.key = d.key
    returning chat_messages.id
  ), turns as (
    select spec from json_array_elements(p_turn_specs) spec
    where (spec->'payload'->'input'->>'userMessageId')::uuid in (select m.id from message m)
  ), added as (
    -- Graphile jobs first: each jobs row records its Graphile job (0028).
    select g.id, (g.payload->>'jobId')::uuid as job_id
    from graphile_worker.add_jobs(array(select json_populate_record(null::graphile_worker.job_spec, t.spec) from turns t)) g
  ), queued as (
    insert into jobs (id, tenant_id, kind, queue_name, max_attempts, session_id, graphile_job_id)
    select r.id, r.tenant_id, r.kind, r.queue_name, r.max_attempts, r.session_id, a.id
    from jsonb_to_recordset(p_turn_jobs) as r(id uuid, tenant_id uuid, kind text, queue_name text, max_attempts integer, session_id uuid)
    join added a on a.job_id = r.id
    returning 1
  )
  select x.i, coalesce(d.found, false), exists (select 1 from message m where m.id = x.message_id),
    d.refused, d.tenant_plan, d.monthly_limit
  from input x left join decided d on d.i = x.i cross join guard;
end;
$$;
