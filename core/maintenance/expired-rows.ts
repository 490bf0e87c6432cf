// Rows that expire: each area that keeps short-lived rows (idempotency
// records, claim attempts, rate-limit windows, ...) adds an entry here and
// the hourly sweep deletes what has expired, in bounded batches so a large
// backlog never holds long locks.
import { sql, type DatabasePool } from '../db/pool.ts';
import type { Config } from '../config.ts';

type FragmentSqlToken = ReturnType<typeof sql.fragment>;

type ExpiringRows = {
  name: string;
  table: string;
  /** The condition that marks a row as expired. */
  expired: (config: Config) => FragmentSqlToken;
};

export const EXPIRING_ROWS: ExpiringRows[] = [
  {
    name: 'finished jobs past retention',
    table: 'jobs',
    expired: (config) => sql.fragment`finished_at < now() - make_interval(days => ${config.jobRetentionDays})`,
  },
  {
    name: 'scheduled job runs older than 30 days',
    table: 'scheduled_job_runs',
    expired: () => sql.fragment`started_at < now() - interval '30 days'`,
  },
  {
    name: 'idempotency records past 24 hours',
    table: 'idempotency_records',
    expired: () => sql.fragment`expires_at < now()`,
  },
  {
    name: 'closed rate-limit windows',
    table: 'rate_limit_windows',
    expired: () => sql.fragment`window_start < now() - interval '1 day'`,
  },
  {
    // A minute past the window's end: replicas' clocks may differ a little.
    name: 'closed agent admission windows',
    table: 'agent_admission_windows',
    expired: (config) =>
      sql.fragment`window_start < now() - make_interval(secs => ${config.identity.agentRateWindowMs / 1000 + 60})`,
  },
  {
    name: 'queue samples older than a day',
    table: 'queue_samples',
    expired: () => sql.fragment`at < now() - interval '1 day'`,
  },
  {
    name: 'ended or expired page sessions',
    table: 'page_sessions',
    expired: () => sql.fragment`expires_at < now() or ended_at < now() - interval '1 day'`,
  },
  {
    name: 'spent or expired refresh tokens',
    table: 'auth_refresh_tokens',
    expired: () => sql.fragment`expires_at < now() - interval '1 day'`,
  },
  {
    name: 'budget snapshots older than 400 days',
    table: 'budget_snapshots',
    expired: () => sql.fragment`taken_at < now() - interval '400 days'`,
  },
  {
    name: 'external cron runs older than 90 days',
    table: 'external_cron_runs',
    expired: () => sql.fragment`created_at < now() - interval '90 days'`,
  },
  {
    name: 'seen HMAC signatures past their window',
    table: 'hmac_seen_signatures',
    expired: () => sql.fragment`expires_at < now()`,
  },
  {
    name: 'external login flows past an hour',
    table: 'external_login_flows',
    expired: () => sql.fragment`expires_at < now() - interval '1 hour'`,
  },
  {
    name: 'external login result tickets past an hour',
    table: 'external_login_tickets',
    expired: () => sql.fragment`expires_at < now() - interval '1 hour'`,
  },
  {
    // A day, so the app that opened the window can still read the outcome.
    name: 'partner connect flows past a day',
    table: 'partner_connect_flows',
    expired: () => sql.fragment`expires_at < now() - interval '1 day'`,
  },
  {
    name: 'altidp notifications older than 90 days',
    table: 'altidp_notifications',
    expired: () => sql.fragment`received_at < now() - interval '90 days' and status <> 'queued'`,
  },
  {
    // A day still waiting for its rollup keeps its records (the totals read them).
    name: 'usage records past USAGE_RECORD_RETENTION_DAYS, rolled up',
    table: 'usage_records',
    expired: (config) => sql.fragment`occurred_at < now() - make_interval(days => ${config.usageRecordRetentionDays})
      and not exists (select 1 from usage_rollup_queue q where q.tenant_id = usage_records.tenant_id and q.day = usage_day(usage_records.occurred_at))`,
  },
  {
    // Providers redeliver for days, not months: the event id stays known that long.
    name: 'processed billing webhook events past EVENT_RETENTION_DAYS',
    table: 'billing_events',
    expired: (config) =>
      sql.fragment`status <> 'queued' and received_at < now() - make_interval(days => ${config.eventRetentionDays})`,
  },
  {
    name: 'channel inbound updates past EVENT_RETENTION_DAYS',
    table: 'channel_updates',
    expired: (config) => sql.fragment`created_at < now() - make_interval(days => ${config.eventRetentionDays})`,
  },
  {
    name: 'channel replies sent or failed past EVENT_RETENTION_DAYS',
    table: 'channel_deliveries',
    expired: (config) =>
      sql.fragment`status <> 'queued' and created_at < now() - make_interval(days => ${config.eventRetentionDays})`,
  },
  {
    // Its e-mail (invitation_emails) goes with it; the audit keeps its entries (invitation id set null).
    name: 'invitations accepted, revoked or expired past EVENT_RETENTION_DAYS',
    table: 'tenant_invitations',
    expired: (config) =>
      sql.fragment`coalesce(accepted_at, revoked_at, expires_at) < now() - make_interval(days => ${config.eventRetentionDays})`,
  },
  {
    // Kept a while to spot a rotated token used again (its family is revoked then).
    name: 'rotated or revoked agent refresh tokens older than 30 days',
    table: 'agent_refresh_tokens',
    expired: () => sql.fragment`status <> 'active' and coalesce(rotated_at, created_at) < now() - interval '30 days'`,
  },
  {
    // Only once the registration's claim can no longer be completed (a denial must keep refusing until then).
    name: 'claim attempts of settled claims, 30 days after they expired',
    table: 'agent_claim_attempts',
    expired: () => sql.fragment`expires_at < now() - interval '30 days' and exists (
      select 1 from agent_registrations r where r.id = agent_claim_attempts.registration_id
        and (r.claim_state = 'claimed' or r.claim_expires_at < now() or r.status = 'revoked'))`,
  },
  {
    name: 'billing sandbox idempotency keys past a day (as Stripe keeps them)',
    table: 'billing_sandbox_idempotency',
    expired: () => sql.fragment`created_at < now() - interval '1 day'`,
  },
  {
    name: 'provider key audit entries older than 400 days',
    table: 'provider_key_audit',
    expired: () => sql.fragment`created_at < now() - interval '400 days'`,
  },
  {
    name: 'operator actions older than 400 days',
    table: 'operator_actions',
    expired: () => sql.fragment`at < now() - interval '400 days'`,
  },
  {
    name: 'billing changes older than 400 days',
    table: 'billing_changes',
    expired: () => sql.fragment`changed_at < now() - interval '400 days'`,
  },
  {
    name: 'contact submissions older than 365 days',
    table: 'contact_submissions',
    expired: () => sql.fragment`created_at < now() - interval '365 days'`,
  },
  // usage_rollup_queue is drained by the rollup itself and must never be swept.
  {
    name: 'stale worker heartbeats',
    table: 'worker_heartbeats',
    expired: () => sql.fragment`last_seen_at < now() - interval '1 day'`,
  },
];

export async function sweepExpiredRows(
  db: DatabasePool,
  config: Config,
  batchSize = 1000,
): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const entry of EXPIRING_ROWS) {
    const table = sql.identifier([entry.table]);
    let total = 0;
    for (;;) {
      // By physical row id: works for any table, whatever its key.
      const { rowCount } = await db.query(sql.unsafe`
        delete from ${table} where ctid = any(array(
          select ctid from ${table} where ${entry.expired(config)} limit ${batchSize}))`);
      total += rowCount;
      if (rowCount < batchSize) break;
    }
    removed[entry.name] = total;
  }
  return removed;
}
