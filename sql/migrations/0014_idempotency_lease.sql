-- Agent API Idempotency-Key claims commit before their operation runs, so a
-- process that dies mid-request used to leave its claim in progress for the
-- record's 24 hours. Now the owner holds a lease it renews while it runs;
-- an identical request that finds the lease run out takes the claim over.
-- Both columns are null on existing rows: a completed record needs neither,
-- and an in-progress one without a lease counts it from created_at (see
-- core/idempotency.ts), so nothing has to be rewritten here.
alter table idempotency_records
  add column lease_owner uuid,
  add column lease_expires_at timestamptz;
