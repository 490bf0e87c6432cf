-- Billing: where a tenant's plan comes from, and the inbound payment events.
--
-- Each source that can grant a plan (a Stripe subscription, an in-app
-- purchase, an operator's decision) has one row in billing_entitlements.
-- billing_refresh_plan() picks the best entitled row and writes the result to
-- tenants (plan, plan_status, plan_source, plan_period_end, agent_addons):
-- every reader (Agent API, models, message limits, /api/billing/status,
-- /capabilities) reads those columns, and only that function writes them.
create table billing_entitlements (
  tenant_id uuid not null references tenants (id) on delete cascade,
  source text not null check (source in ('stripe', 'in_app', 'operator')),
  plan text not null check (plan in ('free', 'pro', 'enterprise')),
  status text not null check (status in ('active', 'trialing', 'past_due', 'canceled', 'incomplete')),
  -- Shown to people; the end of the paid period.
  current_period_end timestamptz,
  -- The grant ends by itself at this time (in-app purchases); null = until a change says otherwise.
  expires_at timestamptz,
  agent_addons integer not null default 0 check (agent_addons >= 0),
  -- The processor's ids (Stripe subscription, in-app product).
  external_ref text,
  -- The newest inbound event applied to this row (older ones are ignored).
  last_event_at timestamptz,
  updated_at timestamptz not null default now(),
  primary key (tenant_id, source)
);

alter table tenants
  add column plan_status text not null default 'active',
  add column plan_source text,
  add column plan_period_end timestamptz,
  add column agent_addons integer not null default 0;

-- One Stripe customer per tenant, created once even under racing checkouts.
create table billing_customers (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  stripe_customer_id text not null unique,
  created_at timestamptz not null default now()
);

-- Inbound events, stored once by the sender's own id, applied by the
-- billing.webhook job. A duplicate delivery finds its row and does nothing.
create table billing_events (
  id uuid primary key default gen_random_uuid(),
  provider text not null check (provider in ('stripe', 'purchase')),
  event_id text not null,
  type text not null,
  tenant_id uuid references tenants (id) on delete set null,
  event_created timestamptz,
  payload jsonb not null,
  status text not null default 'queued' check (status in ('queued', 'applied', 'ignored', 'failed')),
  outcome text,
  job_id uuid,
  received_at timestamptz not null default now(),
  processed_at timestamptz,
  unique (provider, event_id)
);
create index billing_events_tenant_idx on billing_events (tenant_id, received_at desc);

-- Agent add-on purchases sent with an Idempotency-Key: the first request
-- claims the key, a retry finds it and buys nothing more.
create table billing_addon_purchases (
  tenant_id uuid not null references tenants (id) on delete cascade,
  idempotency_key text not null,
  created_at timestamptz not null default now(),
  primary key (tenant_id, idempotency_key)
);

-- Every change of a tenant's effective plan, whoever made it.
create table billing_changes (
  id bigint generated always as identity primary key,
  tenant_id uuid not null references tenants (id) on delete cascade,
  from_plan text not null,
  to_plan text not null,
  source text,
  status text not null,
  reason text not null,
  changed_at timestamptz not null default now()
);
create index billing_changes_tenant_idx on billing_changes (tenant_id, changed_at desc);

-- Recomputes a tenant's effective plan from its entitlements. The highest
-- entitled plan wins (enterprise > pro > free); on a tie operator > stripe >
-- in_app. Entitled: active, trialing or past_due (payment being retried) and
-- not expired. Without one the tenant is on free, showing the newest row's
-- status (e.g. canceled). Add-on agent slots count from entitled rows only.
create function billing_refresh_plan(p_tenant uuid, p_reason text) returns text
language plpgsql as $$
declare
  current_plan text;
  best billing_entitlements%rowtype;
  latest billing_entitlements%rowtype;
  addons integer;
  new_plan text;
  new_status text;
  new_source text;
  new_period_end timestamptz;
begin
  select plan into current_plan from tenants where id = p_tenant for update;
  if not found then
    return null;
  end if;
  select * into best from billing_entitlements e
   where e.tenant_id = p_tenant
     and e.status in ('active', 'trialing', 'past_due')
     and (e.expires_at is null or e.expires_at > now())
   order by case e.plan when 'enterprise' then 3 when 'pro' then 2 else 1 end desc,
            case e.source when 'operator' then 3 when 'stripe' then 2 else 1 end desc
   limit 1;
  select coalesce(sum(e.agent_addons), 0)::integer into addons from billing_entitlements e
   where e.tenant_id = p_tenant
     and e.status in ('active', 'trialing', 'past_due')
     and (e.expires_at is null or e.expires_at > now());
  if best.tenant_id is not null then
    new_plan := best.plan;
    new_status := best.status;
    new_source := best.source;
    new_period_end := coalesce(best.current_period_end, best.expires_at);
  else
    select * into latest from billing_entitlements e where e.tenant_id = p_tenant order by e.updated_at desc limit 1;
    new_plan := 'free';
    new_status := case when latest.tenant_id is null then 'active'
                       when latest.status in ('active', 'trialing', 'past_due') then 'canceled' -- expired
                       else latest.status end;
    new_source := latest.source;
    new_period_end := null;
  end if;
  update tenants
     set plan = new_plan, plan_status = new_status, plan_source = new_source,
         plan_period_end = new_period_end, agent_addons = addons
   where id = p_tenant
     and (plan, plan_status, plan_source, plan_period_end, agent_addons)
         is distinct from (new_plan, new_status, new_source, new_period_end, addons);
  if current_plan is distinct from new_plan then
    insert into billing_changes (tenant_id, from_plan, to_plan, source, status, reason)
    values (p_tenant, current_plan, new_plan, new_source, new_status, p_reason);
  end if;
  return new_plan;
end;
$$;

-- The built-in billing sandbox (development only): a Stripe-compatible API
-- whose objects live here, so api and worker processes share them.
create table billing_sandbox_objects (
  id text primary key,
  object text not null,
  data jsonb not null,
  created_at timestamptz not null default now()
);
create index billing_sandbox_objects_customer_idx on billing_sandbox_objects ((data ->> 'customer'), object);
create table billing_sandbox_idempotency (
  key text primary key,
  fingerprint text not null,
  status integer not null,
  response jsonb not null,
  created_at timestamptz not null default now()
);
