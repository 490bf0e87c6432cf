// Inbound billing events (Stripe webhooks, in-app purchase webhooks): stored
// once by the sender's event id and applied by the billing.webhook job. The
// row and the job commit together; a duplicate delivery writes nothing.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { enqueueJob } from '../jobs/enqueue.ts';

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

export type StoredEvent = { id: string; duplicate: boolean; status: string; jobId: string | null };

const Stored = z.object({ id: z.string(), status: z.string(), job_id: z.string().nullable() });

/**
 * Stores the event and enqueues its job in one transaction. An event without
 * a tenant is kept as 'ignored' with the reason, so an operator can see it.
 */
export async function storeInboundEvent(db: DatabasePool, event: InboundEvent, ignoredReason?: string): Promise<StoredEvent> {
  return db.transaction(async (tx) => {
    const ignored = !event.tenantId || ignoredReason !== undefined;
    const inserted = await tx.maybeOne(sql.type(Stored)`
      insert into billing_events (provider, event_id, type, tenant_id, event_created, payload, status, outcome, processed_at)
      values (${event.provider}, ${event.eventId}, ${event.type}, ${event.tenantId},
              ${event.createdAt ? event.createdAt.toISOString() : null}, ${sql.jsonb(event.payload as never)},
              ${ignored ? 'ignored' : 'queued'}, ${ignored ? (ignoredReason ?? 'unknown_tenant') : null},
              ${ignored ? sql.fragment`now()` : null})
      on conflict (provider, event_id) do nothing
      returning id, status, job_id`);
    if (!inserted) {
      const existing = await tx.one(sql.type(Stored)`
        select id, status, job_id from billing_events where provider = ${event.provider} and event_id = ${event.eventId}`);
      return { id: existing.id, duplicate: true, status: existing.status, jobId: existing.job_id };
    }
    if (ignored) return { id: inserted.id, duplicate: false, status: 'ignored', jobId: null };
    // One queue per tenant: a tenant's billing events apply one at a time, in order.
    const job = await enqueueJob(tx, {
      kind: BILLING_JOB,
      tenantId: event.tenantId!,
      input: { eventId: inserted.id },
      queueName: `billing:${event.tenantId}`,
      maxAttempts: 10,
    });
    await tx.query(sql.unsafe`update billing_events set job_id = ${job.id} where id = ${inserted.id}`);
    return { id: inserted.id, duplicate: false, status: 'queued', jobId: job.id };
  });
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
export async function finishEvent(tx: CommonQueryMethods, id: string, status: 'applied' | 'ignored' | 'failed', outcome: string): Promise<void> {
  await tx.query(sql.unsafe`
    update billing_events set status = ${status}, outcome = ${outcome}, processed_at = now() where id = ${id}`);
}
