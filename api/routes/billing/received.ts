// What both billing webhooks (Stripe, in-app purchases) answer once an event is stored.
import { z } from 'zod';
import { EVENT_STATUSES, type StoredEvent } from '../../../core/billing/events.ts';

export const WebhookReceived = z
  .object({
    received: z.literal(true),
    duplicate: z.boolean().describe('The event id was stored before; nothing was done again'),
    status: z.enum(EVENT_STATUSES).describe('ignored: a type we do not handle, or about no tenant we know'),
  })
  .meta({ id: 'BillingWebhookReceived' });

export const received = (stored: StoredEvent): z.infer<typeof WebhookReceived> => ({
  received: true,
  duplicate: stored.duplicate,
  status: stored.status,
});
