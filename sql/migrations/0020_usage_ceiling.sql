-- Ingested usage has a monthly ceiling per tenant. Reports sum usage over up
-- to 366 days into JSON numbers, exact only below 2^53; without a ceiling a
-- client posting maximal records could push a tenant's totals past that and
-- every summary, budget and spending read would fail for the rest of the
-- month. One counter row per tenant and UTC month of occurrence, updated in
-- the ingest's transaction.
create table usage_ingest_months (
  tenant_id uuid not null references tenants (id) on delete cascade,
  month date not null,
  cost_micros bigint not null check (cost_micros >= 0),
  tokens bigint not null check (tokens >= 0),
  primary key (tenant_id, month)
);
