// Inbound billing events (Stripe webhooks, in-app purchase webhooks): stored
// once by the sender's event id and applied by the billing.webhook job. The
// row and the job commit together; a duplicate delivery writes nothing.
import { z } from 'zod';
import { timeOrderedId } from '../ids.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import type { GroupCommitter } from '../jobs/group-commit.ts';

export const BILLING_JOB = 'billing.webhook';
export type BillingProvider = 'stripe' | 'purchase';

export type InboundEvent = {
  provider: BillingProvider;
  eventId: string;
  type: string;
  /** The tenant the event is about; null when it names nobody we know (stored as ignored). */
  tenantId: string | null;
  /** When the sender created the event (orders deliveries). */
  createdAt: Date | null;
  payload: unknown;
};

export const EVENT_STATUSES = ['queued', 'applied', 'ignored', 'failed'] as const;
export type StoredEvent = {
  id: string;
  duplicate: boolean;
  status: (typeof EVENT_STATUSES)[number];
  jobId: string | null;
};

const Stored = z.object({
  id: z.string(),
  status: z.enum(EVENT_STATUSES),
  job_id: z.string().nullable(),
  inserted: z.boolean(),
});

/**
 * Stores the event and enqueues its job in one commit, through the group
 * committer (deliveries that arrive together share a transaction). One
 * statement either inserts the row, with its job's id chosen in advance, or
 * reads the row a previous delivery stored. An event without a tenant is
 * kept as 'ignored' with the reason, so an operator can see it.
 */
export async function storeInboundEvent(
  jobs: GroupCommitter,
  db: DatabasePool,
  event: InboundEvent,
  ignoredReason?: string,
): Promise<StoredEvent> {
  const ignored = !event.tenantId || ignoredReason !== undefined;
  const jobId = ignored ? null : timeOrderedId();
  const { value } = await jobs.submit({
    savepoint: false,
    work: (tx) =>
      tx.maybeOne(sql.type(Stored)`
        with ins as (
          insert into billing_events (provider, event_id, type, tenant_id, event_created, payload, status, outcome, processed_at, job_id)
          values (${event.provider}, ${event.eventId}, ${event.type}, ${event.tenantId},
                  ${event.createdAt ? event.createdAt.toISOString() : null}, ${sql.jsonb(event.payload as never)},
                  ${ignored ? 'ignored' : 'queued'}, ${ignored ? (ignoredReason ?? 'unknown_tenant') : null},
                  ${ignored ? sql.fragment`now()` : null}, ${jobId})
          on conflict (provider, event_id) do nothing
          returning id, status, job_id)
        select id, status, job_id, true as inserted from ins
        union all
        select id, status, job_id, false from billing_events
         where provider = ${event.provider} and event_id = ${event.eventId} and not exists (select 1 from ins)`),
    // One queue per tenant: a tenant's billing events apply one at a time, in order.
    jobs: (row) =>
      row?.inserted && jobId
        ? [
            {
              id: jobId,
              kind: BILLING_JOB,
              tenantId: event.tenantId!,
              input: { eventId: row.id },
              queueName: `billing:${event.tenantId}`,
              maxAttempts: 10,
            },
          ]
        : [],
  });
  // A racing delivery committed after this statement's snapshot: read it now.
  const row =
    value ??
    (await db.one(sql.type(Stored)`
    select id, status, job_id, false as inserted from billing_events where provider = ${event.provider} and event_id = ${event.eventId}`));
  return { id: row.id, duplicate: !row.inserted, status: row.status, jobId: row.job_id };
}

export const EventRow = z.object({
  id: z.string(),
  provider: z.enum(['stripe', 'purchase']),
  event_id: z.string(),
  type: z.string(),
  tenant_id: z.string().nullable(),
  event_created: z.string().nullable(),
  payload: z.unknown(),
  status: z.string(),
});
export type EventRow = z.infer<typeof EventRow>;

export async function loadEvent(db: CommonQueryMethods, id: string): Promise<EventRow | null> {
  return db.maybeOne(sql.type(EventRow)`
    select id, provider, event_id, type, tenant_id, event_created, payload, status from billing_events where id = ${id}`);
}

/** Records how the event ended: applied, or ignored with the reason. */
export async function finishEvent(
  tx: CommonQueryMethods,
  id: string,
  status: 'applied' | 'ignored' | 'failed',
  outcome: string,
): Promise<void> {
  await tx.query(sql.unsafe`
    update billing_events set status = ${status}, outcome = ${outcome}, processed_at = now() where id = ${id}`);
}
