// Stripe traffic from the billing sandbox, as people and Stripe make it: each
// billing tenant subscribes (checkout, then "Pay" on the sandbox page), waits
// for Pro, cancels in the portal, waits for Free, and again. The sandbox
// signs its events and delivers them once, right after its commit; this file
// plays Stripe's side of delivery from then on: an event that has not been
// stored a few seconds later is delivered again (Stripe retries until it is
// acknowledged), and a fifth of the events are delivered twice on purpose
// (Stripe delivers at least once). Both are signed with Stripe's own signer.
import Stripe from 'stripe';
import { z } from 'zod';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import { RawBody, type SoakClient } from './client.ts';
import type { SoakTenant } from './seed.ts';

/** A delivery still missing this long after the sandbox emitted it is delivered again. */
const REDELIVER_AFTER_S = 3;

export class BillingWorkload {
  /** Plan changes each tenant saw through GET /api/billing/status (free→pro, pro→free). */
  readonly transitions = new Map<string, number>();
  readonly unanswered = new Map<string, number>();
  redelivered = 0;
  duplicates = 0;
  private readonly signer = new Stripe('sk_test_soak_signer_only');
  private readonly duplicated = new Set<string>();
  private running: Promise<void>[] = [];
  private stopped = false;
  private redelivery: NodeJS.Timeout | null = null;

  constructor(
    private readonly client: SoakClient,
    private readonly db: DatabasePool,
    private readonly webhookSecret: string,
    private readonly random: () => number,
  ) {}

  start(tenants: SoakTenant[]): void {
    this.running = tenants.map((t) => this.cycle(t));
    this.redelivery = setInterval(() => void this.deliverMissing().catch(() => undefined), 2_000);
  }

  /** Subscribe, wait for Pro, cancel, wait for Free, until stopped (a started step is finished). */
  private async cycle(tenant: SoakTenant): Promise<void> {
    while (!this.stopped) {
      const headers = { authorization: `Bearer ${await tenant.token()}`, 'x-tenant-id': tenant.tenantId };
      const checkout = await this.answered(tenant, 'POST', '/api/billing/checkout', headers, 200);
      if (!checkout) return;
      const session = JSON.parse(checkout.body) as { url: string };
      if (!(await this.answered(tenant, 'POST', `${new URL(session.url).pathname}/pay`, {}, 303))) return;
      if (!(await this.planBecomes(tenant, 'pro'))) return;
      await sleep(1_000 + this.random() * 2_000);
      const portal = await this.answered(tenant, 'POST', '/api/billing/portal', headers, 200);
      if (!portal) return;
      const portalPath = new URL((JSON.parse(portal.body) as { url: string }).url).pathname;
      const page = await this.answered(tenant, 'GET', portalPath, {}, 200);
      const cancel = page && /action="([^"]+\/cancel)"/.exec(page.body)?.[1];
      if (!cancel) return this.count(`no cancel form on the portal page`);
      if (!(await this.answered(tenant, 'POST', cancel, {}, 303))) return;
      if (!(await this.planBecomes(tenant, 'free'))) return;
      await sleep(1_000 + this.random() * 2_000);
    }
  }

  private async answered(
    tenant: SoakTenant,
    method: string,
    route: string,
    headers: Record<string, string>,
    want: number,
  ) {
    const answer = await this.client.until(method, route, { headers, deadline: Date.now() + 120_000 });
    if (answer?.status === want) return answer;
    this.count(
      `${method} ${route.replace(/\/[A-Za-z0-9_]{20,}/g, '/:id')}: ${answer ? `${answer.status} ${answer.body.slice(0, 120)}` : 'unreachable'} (tenant ${tenant.tenantId})`,
    );
    return null;
  }

  private async planBecomes(tenant: SoakTenant, plan: string): Promise<boolean> {
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const status = await this.client.request('GET', '/api/billing/status', {
        headers: { authorization: `Bearer ${await tenant.token()}`, 'x-tenant-id': tenant.tenantId },
      });
      if (status?.status === 200 && (JSON.parse(status.body) as { plan: string }).plan === plan) {
        this.transitions.set(tenant.tenantId, (this.transitions.get(tenant.tenantId) ?? 0) + 1);
        return true;
      }
      await sleep(300);
    }
    this.count(`the plan did not become ${plan} in 120 s (tenant ${tenant.tenantId})`);
    return false;
  }

  /** Stripe's side: every emitted event not yet stored is delivered again; some stored ones twice on purpose. */
  async deliverMissing(): Promise<void> {
    const events = await this.db.any(sql.type(z.object({ id: z.string(), payload: z.string(), stored: z.boolean() }))`
      select o.id, o.data::text as payload, exists (select 1 from billing_events e where e.provider = 'stripe' and e.event_id = o.id) as stored
      from billing_sandbox_objects o
      where o.object = 'event' and (o.data ->> 'created')::bigint < extract(epoch from now()) - ${REDELIVER_AFTER_S}`);
    for (const event of events) {
      const again = event.stored && !this.duplicated.has(event.id);
      if (event.stored && !again) continue;
      if (again) {
        this.duplicated.add(event.id);
        if (this.random() >= 0.2) continue;
      }
      const signature = this.signer.webhooks.generateTestHeaderString({
        payload: event.payload,
        secret: this.webhookSecret,
      });
      const answer = await this.client.request('POST', '/api/billing/webhook', {
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        body: new RawBody(event.payload),
      });
      if (answer?.status === 200) {
        if (again) this.duplicates++;
        else this.redelivered++;
      }
    }
  }

  /** The cycles end after their current step; then Stripe delivers what is still missing. */
  async settle(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
    if (this.redelivery) clearInterval(this.redelivery);
    for (let i = 0; i < 20; i++) {
      await this.deliverMissing();
      const missing = await this.db.oneFirst(sql.type(z.object({ n: z.number() }))`
        select count(*)::int as n from billing_sandbox_objects o
        where o.object = 'event' and not exists (select 1 from billing_events e where e.provider = 'stripe' and e.event_id = o.id)`);
      if (missing === 0) return;
      await sleep(1_000);
    }
  }

  private count(why: string): void {
    this.unanswered.set(why, (this.unanswered.get(why) ?? 0) + 1);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
