// billing.webhook: applies one stored inbound billing event (a Stripe webhook
// or an in-app purchase event) to the tenant's entitlements. The event row is
// marked applied/ignored in the same commit as the job's success; a retried
// job finds the row already final and does nothing again.
import { z } from 'zod';
import { applyPurchaseEvent } from '../../core/billing/purchase.ts';
import { finishEvent, loadEvent } from '../../core/billing/events.ts';
import { applyStripeEvent, type Applied } from '../../core/billing/stripe-events.ts';
import { createStripe, type StripeHandle } from '../../core/billing/stripe-client.ts';
import type { CommonQueryMethods, DatabasePool } from '../../core/db/pool.ts';
import { PermanentJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';
import type { Config } from '../../core/config.ts';

const Input = z.object({ eventId: z.uuid() });

// One SDK per worker pool (the sandbox's state is in PostgreSQL, shared with the api).
const handles = new WeakMap<DatabasePool, StripeHandle>();
const stripeFor = (config: Config, db: DatabasePool) => {
  let handle = handles.get(db);
  if (!handle) {
    handle = createStripe(config, db);
    handles.set(db, handle);
  }
  return handle.stripe();
};

export default defineTask('billing.webhook', Input, async (input, ctx) => {
  const row = await loadEvent(ctx.db, input.eventId);
  if (!row || row.tenant_id !== ctx.tenantId)
    throw new PermanentJobError('event_missing', 'The billing event of this job no longer exists.');
  if (row.status !== 'queued') return { status: row.status, outcome: 'already processed' };
  const finish = async (tx: CommonQueryMethods, outcome: Applied) => {
    await finishEvent(tx, row.id, outcome.status, outcome.outcome);
    await ctx.completeWithin(tx, { eventId: row.event_id, type: row.type, ...outcome });
  };
  try {
    if (row.provider === 'stripe') {
      return await applyStripeEvent(
        { db: ctx.db, config: ctx.config, stripe: stripeFor(ctx.config, ctx.db) },
        row,
        finish,
      );
    }
    return await applyPurchaseEvent({ db: ctx.db, config: ctx.config, logger: ctx.logger }, row, finish);
  } catch (error) {
    // A failure that will not be retried stays visible on the event as well as on the job.
    if (error instanceof PermanentJobError || ctx.attempt >= ctx.maxAttempts) {
      const code = (error as { code?: string }).code ?? 'task_failed';
      await finishEvent(ctx.db, row.id, 'failed', code).catch(() => undefined);
    }
    throw error;
  }
});
