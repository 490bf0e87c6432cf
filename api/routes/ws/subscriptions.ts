// The job subscriptions of one websocket connection: each job's snapshot then
// its changes in order, stream deltas batched per turn of the event loop, and
// updates held while a membership change is re-checked (protocol in session.ts).
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../../../core/config.ts';
import type { DatabasePool } from '../../../core/db/pool.ts';
import { isDatabaseUnavailable } from '../../../core/db/unavailable.ts';
import type { Delta } from '../../../core/jobs/deltas.ts';
import type { JobEventHub } from '../../../core/jobs/events.ts';
import { findJobForUser } from '../../../core/jobs/read.ts';
import { isFinal, toJobStatus, type JobRow } from '../../../core/jobs/schema.ts';
import { UNAVAILABLE } from './protocol.ts';

type Subscription = {
  lastVersion: number;
  /** Known once the job is read; membership changes are matched on it. */
  tenantId: string | null;
  /** Events that arrive before the snapshot is read are held, then filtered by version. */
  pending: JobRow[] | null;
  /** Events held while the tenant's membership is being re-checked. */
  held: JobRow[];
  /** Set until the snapshot is sent: stream deltas that arrive meanwhile are in the hub's memory of the stream. */
  pendingDeltas: Delta[] | null;
  unsubscribe: () => void;
};

export type SubscriptionDeps = {
  config: Config;
  db: DatabasePool;
  hub: JobEventHub;
  log: FastifyBaseLogger;
};

/** How the subscriptions reach their connection's client. */
export type SubscriptionOutput = {
  send: (message: unknown) => void;
  error: (code: string, message: string, jobId?: string) => void;
};

export class JobSubscriptions {
  private subscriptions = new Map<string, Subscription>();
  /** Tenants whose updates are held while a membership change is checked (count of checks). */
  private heldTenants = new Map<string, number>();
  /** Bumped by every membership change: a job read that overlapped one is read again. */
  private accessEpoch = 0;
  /** Deltas to send together at the end of this turn of the event loop. */
  private outbox: Delta[] = [];

  constructor(
    private readonly deps: SubscriptionDeps,
    private readonly out: SubscriptionOutput,
  ) {}

  unsubscribe(jobId: string) {
    this.subscriptions.get(jobId)?.unsubscribe();
    this.subscriptions.delete(jobId);
  }

  /** Ends every subscription (the connection is gone). */
  clear() {
    for (const sub of this.subscriptions.values()) sub.unsubscribe();
    this.subscriptions.clear();
  }

  async subscribe(jobId: string, userId: string) {
    if (this.subscriptions.has(jobId)) return;
    if (this.subscriptions.size >= this.deps.config.ws.maxSubscriptions) {
      return this.out.error(
        'too_many_subscriptions',
        `At most ${this.deps.config.ws.maxSubscriptions} jobs per connection; unsubscribe from finished ones.`,
        jobId,
      );
    }
    // Listen before reading, so a change between the read and the listen is not lost.
    const sub: Subscription = {
      lastVersion: 0,
      tenantId: null,
      pending: [],
      held: [],
      pendingDeltas: [],
      unsubscribe: () => undefined,
    };
    const stopRows = this.deps.hub.subscribe(jobId, (row) => this.deliver(jobId, sub, row));
    const stopDeltas = this.deps.hub.subscribeDeltas(jobId, (delta) => this.deliverDelta(sub, delta));
    sub.unsubscribe = () => {
      stopRows();
      stopDeltas();
    };
    this.subscriptions.set(jobId, sub);

    let row: JobRow | null;
    try {
      row = await this.readJob(jobId, userId);
    } catch (error) {
      // Never leave a failed subscription behind: it would swallow every later subscribe.
      const ours = this.subscriptions.get(jobId) === sub;
      this.drop(jobId, sub);
      if (!ours) return;
      if (isDatabaseUnavailable(error)) return this.out.error('unavailable', UNAVAILABLE, jobId);
      this.deps.log.error({ err: error, jobId }, 'websocket: reading a job failed');
      return this.out.error('internal_error', 'The job could not be read; subscribe again.', jobId);
    }
    if (this.subscriptions.get(jobId) !== sub) return; // unsubscribed or closed meanwhile
    if (!row) {
      // Exactly what a missing job gets, whether it is absent or another tenant's.
      this.drop(jobId, sub);
      return this.out.error('not_found', 'No such job.', jobId);
    }
    sub.tenantId = row.tenant_id;
    const held = sub.pending ?? [];
    sub.pending = null;
    this.deliver(jobId, sub, row);
    // A job already streaming: what it streamed so far, in one delta from
    // offset 0 (it holds the deltas that arrived while the job was read).
    sub.pendingDeltas = null;
    const sofar = this.deps.hub.streamedSoFar(jobId);
    if (sofar && this.subscriptions.get(jobId) === sub) this.deliverDelta(sub, sofar);
    for (const later of held) this.deliver(jobId, sub, later);
  }

  private deliverDelta(sub: Subscription, delta: Delta) {
    if (sub.pendingDeltas) return; // the text so far follows the snapshot
    // While access is re-checked, deltas are dropped (the job's next state carries the text).
    if (sub.tenantId && this.heldTenants.has(sub.tenantId)) return;
    if (this.outbox.length === 0) queueMicrotask(() => this.flushDeltas());
    this.outbox.push(delta);
  }

  /** Sends the deltas gathered so far, if any. */
  flushDeltas() {
    if (this.outbox.length === 0) return;
    const deltas = this.outbox;
    this.outbox = [];
    this.out.send({ type: 'deltas', deltas });
  }

  /** The job if the user may see it; read again when a membership change overlapped the read. */
  private async readJob(jobId: string, userId: string): Promise<JobRow | null> {
    for (let attempt = 1; ; attempt++) {
      const epoch = this.accessEpoch;
      const row = await findJobForUser(this.deps.db, jobId, userId);
      if (!row || epoch === this.accessEpoch || attempt >= 3) return row;
    }
  }

  private deliver(jobId: string, sub: Subscription, row: JobRow) {
    if (sub.pending) {
      sub.pending.push(row);
      return;
    }
    if (sub.tenantId && this.heldTenants.has(sub.tenantId)) {
      sub.held.push(row);
      return;
    }
    if (row.version <= sub.lastVersion) return;
    sub.lastVersion = row.version;
    this.out.send({ type: 'job', job: toJobStatus(row) });
    if (isFinal(row.status)) this.drop(jobId, sub);
  }

  private drop(jobId: string, sub: Subscription) {
    sub.unsubscribe();
    if (this.subscriptions.get(jobId) === sub) this.subscriptions.delete(jobId);
  }

  holdTenant(tenantId: string) {
    this.accessEpoch++;
    this.heldTenants.set(tenantId, (this.heldTenants.get(tenantId) ?? 0) + 1);
  }

  releaseTenant(tenantId: string, stillMember: boolean) {
    const holds = (this.heldTenants.get(tenantId) ?? 1) - 1;
    if (holds > 0) this.heldTenants.set(tenantId, holds);
    else this.heldTenants.delete(tenantId);
    for (const [jobId, sub] of [...this.subscriptions]) {
      if (sub.tenantId !== tenantId) continue;
      if (!stillMember) {
        // Reads exactly like a job that does not exist, as for a first subscribe.
        this.drop(jobId, sub);
        this.out.error('not_found', 'No such job.', jobId);
      } else if (holds <= 0) {
        const held = sub.held.splice(0);
        for (const row of held) this.deliver(jobId, sub, row);
      }
    }
  }

  subscribedTenants(): Set<string> {
    const tenants = new Set<string>();
    for (const sub of this.subscriptions.values()) if (sub.tenantId) tenants.add(sub.tenantId);
    return tenants;
  }
}
