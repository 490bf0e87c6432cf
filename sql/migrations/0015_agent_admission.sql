-- The Agent API's admission limit, shared by every api replica: one row per
-- (key, fixed window) counting the tokens granted so far. Replicas lease
-- blocks of tokens with one upsert each, never one write per request.
-- Unlogged: the rows live for minutes and a crash that empties the table only
-- reopens the current windows; skipping WAL keeps the leases cheap.
create unlogged table agent_admission_windows (
  key text not null,
  -- floor(now / window) * window, computed by the replicas so they agree.
  window_start timestamptz not null,
  granted integer not null check (granted >= 0),
  -- The size of the most recent lease, so the upsert can return it.
  last_grant integer not null,
  -- Lease statements that wrote this row (observability; tests count them).
  leases integer not null default 1,
  primary key (key, window_start)
);
create index agent_admission_windows_start_idx on agent_admission_windows (window_start);
