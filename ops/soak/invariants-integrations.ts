// The soak's verdict on what comes from and goes to the outside world:
// webhook-channel messages and their replies, Stripe's events, and the
// scheduled (cron) runs that must fire once across both workers.
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import type { BillingWorkload } from './billing.ts';
import type { ChannelWorkload } from './channels.ts';
import type { Invariant, Window } from './invariants.ts';

export async function channelInvariants(db: DatabasePool, channels: ChannelWorkload): Promise<Invariant[]> {
  const out: Invariant[] = [];
  const jobIds = channels.inbound.map((m) => m.jobId);
  const deliveries = await db.any(sql.type(z.object({ id: z.string(), key: z.string() }))`
    select id, key from channel_deliveries where key = any(${sql.array(
      jobIds.map((id) => `turn:${id}`),
      'text',
    )})`);
  const deliveryOf = new Map(deliveries.map((d) => [d.key.slice('turn:'.length), d.id]));
  const taken = new Map<string, number>();
  for (const a of channels.arrivals) if (!a.refused) taken.set(a.key, (taken.get(a.key) ?? 0) + 1);
  const known = new Set(await db.anyFirst(sql.type(z.object({ id: z.string() }))`select id from channel_deliveries`));

  const missing: string[] = [];
  for (const m of channels.inbound) {
    const key = deliveryOf.get(m.jobId);
    if (!key) missing.push(`message ${m.messageId} (turn ${m.jobId}): no reply queued`);
    else if (!taken.has(key))
      missing.push(`message ${m.messageId} (turn ${m.jobId}): reply ${key} never reached the receiver`);
  }
  for (const key of taken.keys())
    if (!known.has(key)) missing.push(`the receiver got a reply nobody queued (key ${key})`);
  const copies = [...taken.values()].reduce((sum, n) => sum + n - 1, 0);
  const refused = channels.arrivals.filter((a) => a.refused).length;
  out.push({
    name: 'every accepted channel message got one reply at the receiver, once per Idempotency-Key',
    checked: channels.inbound.length,
    violations: missing,
    note: `${refused} refused by the receiver with 503 and sent again; ${copies} copies of an acknowledged reply, dropped by their key`,
  });

  // Replies follow their conversation's messages (the channel's replies queue behind each other).
  const orderOf = new Map(
    channels.inbound.flatMap((m) => (deliveryOf.has(m.jobId) ? [[deliveryOf.get(m.jobId)!, m] as const] : [])),
  );
  const lastOrder = new Map<string, number>();
  const firstSeen = new Set<string>();
  const order: string[] = [];
  for (const a of channels.arrivals) {
    const m = orderOf.get(a.key);
    if (a.refused || !m || firstSeen.has(a.key)) continue;
    firstSeen.add(a.key);
    const last = lastOrder.get(m.conversation) ?? 0;
    if (m.order < last)
      order.push(`${m.conversation}: the reply to message ${m.order} came after the reply to message ${last}`);
    lastOrder.set(m.conversation, Math.max(last, m.order));
  }
  out.push({ name: "a conversation's replies arrive in message order", checked: firstSeen.size, violations: order });

  const repeats = channels.repeats
    .filter((r) => !r.same)
    .map((r) => `message ${r.messageId}: first ${r.first.slice(0, 100)}, again ${r.again.slice(0, 100)}`);
  const turns = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from channel_updates where status = 'turn' and text like 'channel message %'`);
  const unanswered = [...channels.unanswered.values()].reduce((a, b) => a + b, 0);
  if (turns > channels.inbound.length + unanswered)
    repeats.push(
      `${turns} turns stored for ${channels.inbound.length} accepted messages (${unanswered} never answered)`,
    );
  out.push({
    name: 'a repeated message id got its first answer and no second turn',
    checked: channels.repeats.length + channels.inbound.length,
    violations: repeats,
  });
  return out;
}

export async function billingInvariants(
  db: DatabasePool,
  billing: BillingWorkload,
  tenantIds: string[],
): Promise<Invariant[]> {
  const events = await db.any(sql.type(z.object({ id: z.string(), type: z.string(), status: z.string().nullable() }))`
    select o.id, o.data ->> 'type' as type, e.status
    from billing_sandbox_objects o left join billing_events e on e.provider = 'stripe' and e.event_id = o.id
    where o.object = 'event'`);
  const notApplied = events
    .filter((e) => e.status !== 'applied' && e.status !== 'ignored')
    .map((e) => `${e.type} ${e.id}: ${e.status ?? 'never stored'}`);
  const out: Invariant[] = [
    {
      name: 'every Stripe event was stored once and applied',
      checked: events.length,
      violations: notApplied,
      note: `${billing.redelivered} delivered again after a lost delivery, ${billing.duplicates} delivered twice on purpose`,
    },
  ];

  const rows = await db.any(sql.type(
    z.object({ tenant_id: z.string(), plan: z.string(), changes: z.number(), subscribed: z.boolean() }),
  )`
    select t.id as tenant_id, t.plan,
      (select count(*)::int from billing_changes c where c.tenant_id = t.id and c.from_plan <> c.to_plan) as changes,
      exists (select 1 from billing_customers bc join billing_sandbox_objects s on s.object = 'subscription' and s.data ->> 'customer' = bc.stripe_customer_id
              where bc.tenant_id = t.id and s.data ->> 'status' = 'active') as subscribed
    from tenants t where t.id = any(${sql.array(tenantIds, 'uuid')})`);
  const wrong: string[] = [];
  for (const r of rows) {
    const seen = billing.transitions.get(r.tenant_id) ?? 0;
    if (r.changes !== seen)
      wrong.push(`tenant ${r.tenant_id}: ${r.changes} plan changes recorded, ${seen} seen by its people`);
    if ((r.plan === 'pro') !== r.subscribed)
      wrong.push(
        `tenant ${r.tenant_id}: plan ${r.plan}, ${r.subscribed ? 'an active' : 'no active'} Stripe subscription`,
      );
  }
  const unanswered = [...billing.unanswered].map(([why, n]) => `${n}× ${why}`);
  out.push({
    name: "every plan change happened once, and each plan is Stripe's",
    checked: [...billing.transitions.values()].reduce((a, b) => a + b, 0),
    violations: [...wrong, ...unanswered],
  });
  return out;
}

/** The minute the every-minute item last fired for (its last run's, scheduled_job_last_runs). */
export async function cronLastExecution(db: DatabasePool): Promise<number | null> {
  const at = await db.maybeOneFirst(sql.type(z.object({ at: z.number().nullable() }))`
    select extract(epoch from scheduled_for)::float8 * 1000 as at from scheduled_job_last_runs where identifier = 'billing_expire'`);
  return at ?? null;
}

/**
 * Cron: every minute of the run fired (a minute missed beside a fault is
 * noted: a missed minute is not backfilled), and no recorded run of any
 * item happened twice for one scheduled time (both workers run the cron).
 */
export async function cronInvariant(
  db: DatabasePool,
  fired: Set<number>,
  window: Window,
  faults: Window[],
): Promise<Invariant> {
  const twice = await db.any(sql.type(z.object({ identifier: z.string(), at: z.string(), runs: z.number() }))`
    select identifier, scheduled_for::text as at, count(*)::int as runs from scheduled_job_runs
    where scheduled_for >= to_timestamp(${window.from / 1000}) group by 1, 2 having count(*) > 1`);
  const violations = twice.map((r) => `${r.identifier} for ${r.at}: ran ${r.runs} times`);
  let missedBesideFault = 0;
  let minutes = 0;
  for (let m = Math.ceil(window.from / 60_000) * 60_000; m <= window.to - 5_000; m += 60_000) {
    minutes++;
    if (fired.has(m)) continue;
    if (faults.some((f) => f.to >= m - 60_000 && f.from <= m + 10_000)) missedBesideFault++;
    else violations.push(`${new Date(m).toISOString()}: billing_expire never fired`);
  }
  return {
    name: 'cron fired every minute, each run once across both workers',
    checked: minutes,
    violations,
    note: missedBesideFault
      ? `${missedBesideFault} minutes missed beside a fault (a missed minute is not backfilled)`
      : undefined,
  };
}
