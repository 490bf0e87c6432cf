// One websocket connection: authentication, job subscriptions, delivery.
//
// Protocol (JSON text frames):
//   client -> {type:"auth", token} (first message when no Authorization header
//             was sent; later, a fresh token for the same user to stay connected)
//             {type:"subscribe", jobId} | {type:"unsubscribe", jobId} | {type:"ping"}
//   server -> {type:"ready", userId, expiresAt} | {type:"job", job: JobStatus} | {type:"pong"}
//             {type:"deltas", deltas: [{jobId, attempt, offset, text}]}
//             {type:"unsubscribed", jobId} | {type:"error", code, message, jobId?}
// A subscription first delivers the job as it is now, then every change in
// order; it ends by itself after the final state. While a model streams,
// "deltas" carry the pieces of its answer as they arrive (the text at
// `offset` of the answer of that attempt), between the job's own messages;
// the deltas that arrive together for this connection come in one message.
// A subscriber that comes mid-stream first gets the text so far (offset 0).
//
// Access is re-checked for as long as the socket lives:
// - The socket closes with 4401 "token expired" at the token's expiry
//   (`expiresAt` of "ready"), unless the client sent {type:"auth"} with a
//   fresh token of the same user first: that answers "ready" again with the
//   new expiresAt. A token of another user, or an invalid one, is refused
//   with an "unauthorized" error and the current token stays in force.
// - When the account is deleted the socket closes with 4401. When such a
//   check cannot reach the database, it closes with 1013: reconnect.
// - When the user's membership of a tenant ends, every subscription to that
//   tenant's jobs ends with {type:"error", code:"not_found", jobId}.
// - An "unavailable" error (with jobId for a subscribe) means the database
//   could not be reached: send the same message again in a few seconds.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { InvalidTokenError } from '../../../core/auth/platform-token.ts';
import type { Config } from '../../../core/config.ts';
import type { DatabasePool } from '../../../core/db/pool.ts';
import { isDatabaseUnavailable } from '../../../core/db/unavailable.ts';
import type { Delta } from '../../../core/jobs/deltas.ts';
import type { JobEventHub } from '../../../core/jobs/events.ts';
import { findJobForUser } from '../../../core/jobs/read.ts';
import { isFinal, toJobStatus, type JobRow } from '../../../core/jobs/schema.ts';
import type { DirectorySession, SessionDirectory } from './directory.ts';
import {
  CLOSE,
  MAX_BAD_FRAMES,
  MAX_TIMER_MS,
  parseClientMessage,
  UNAVAILABLE,
  type ClientMessage,
  type SessionPrincipal,
} from './protocol.ts';

export { CLOSE, type SessionPrincipal } from './protocol.ts';

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

export type SessionDeps = {
  config: Config;
  db: DatabasePool;
  hub: JobEventHub;
  log: FastifyBaseLogger;
  authenticate: (token: string) => Promise<SessionPrincipal>;
  directory: SessionDirectory;
};

export class WsSession implements DirectorySession {
  private principal: SessionPrincipal | null = null;
  private subscriptions = new Map<string, Subscription>();
  private badFrames = 0;
  private authTimer: NodeJS.Timeout | null = null;
  private expiryTimer: NodeJS.Timeout | null = null;
  /** Tenants whose updates are held while a membership change is checked (count of checks). */
  private heldTenants = new Map<string, number>();
  /** Bumped by every membership change: a job read that overlapped one is read again. */
  private accessEpoch = 0;
  private disposed = false;
  /** Deltas to send together at the end of this turn of the event loop. */
  private outbox: Delta[] = [];
  alive = true;

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: SessionDeps,
    principal: SessionPrincipal | null,
  ) {
    socket.on('message', (data, isBinary) => void this.onMessage(data, isBinary));
    socket.on('pong', () => (this.alive = true));
    socket.on('close', () => this.dispose());
    socket.on('error', (error) => deps.log.debug({ err: error }, 'websocket error'));
    if (principal) {
      this.ready(principal);
    } else {
      this.authTimer = setTimeout(
        () => this.close(CLOSE.unauthorized, 'authentication timed out'),
        deps.config.ws.authTimeoutMs,
      );
    }
  }

  private ready(principal: SessionPrincipal) {
    if (this.disposed) return;
    if (!this.principal) this.deps.directory.add(principal.userId, this);
    this.principal = principal;
    if (this.authTimer) clearTimeout(this.authTimer);
    this.authTimer = null;
    this.armExpiry(principal.expiresAt);
    this.send({ type: 'ready', userId: principal.userId, expiresAt: principal.expiresAt.toISOString() });
  }

  private armExpiry(at: Date) {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    const ms = Math.max(0, at.getTime() - Date.now());
    this.expiryTimer = setTimeout(
      () => {
        if (ms > MAX_TIMER_MS) this.armExpiry(at);
        else this.close(CLOSE.unauthorized, 'token expired; send a fresh token before expiresAt, or reconnect');
      },
      Math.min(ms, MAX_TIMER_MS),
    );
  }

  /** Heartbeat tick: a peer that did not answer the last ping is gone. */
  heartbeat() {
    if (!this.alive) {
      this.deps.log.info('websocket: no pong since the last ping; terminating');
      this.socket.terminate();
      return;
    }
    this.alive = false;
    this.socket.ping();
  }

  close(code: number, reason: string) {
    if (this.socket.readyState === this.socket.OPEN || this.socket.readyState === this.socket.CONNECTING) {
      this.socket.close(code, reason);
    }
    this.dispose();
  }

  private dispose() {
    if (this.disposed) return;
    this.disposed = true;
    if (this.authTimer) clearTimeout(this.authTimer);
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    if (this.principal) this.deps.directory.remove(this.principal.userId, this);
    for (const sub of this.subscriptions.values()) sub.unsubscribe();
    this.subscriptions.clear();
  }

  private send(message: unknown) {
    // Deltas gathered so far go first: nothing of a job may follow its final state.
    if (this.outbox.length > 0 && (message as { type?: string }).type !== 'deltas') this.flushDeltas();
    if (this.socket.readyState !== this.socket.OPEN) return;
    // Never buffer without bound: a consumer that stopped reading is cut off.
    if (this.socket.bufferedAmount > this.deps.config.ws.maxBufferedBytes) {
      this.deps.log.warn({ buffered: this.socket.bufferedAmount }, 'websocket: slow consumer disconnected');
      this.dispose();
      this.socket.terminate();
      return;
    }
    this.socket.send(JSON.stringify(message));
  }

  private error(code: string, message: string, jobId?: string) {
    this.send({ type: 'error', code, message, ...(jobId ? { jobId } : {}) });
  }

  private async onMessage(data: unknown, isBinary: boolean) {
    const parsed = parseClientMessage(data, isBinary);
    if (typeof parsed === 'string') {
      this.badFrames++;
      this.error(
        'invalid_message',
        `Message refused: ${parsed}. Expected {"type":"subscribe","jobId":"<uuid>"}, "unsubscribe" or "ping".`,
      );
      if (this.badFrames > MAX_BAD_FRAMES) this.close(CLOSE.policy, 'too many invalid messages');
      return;
    }

    try {
      await this.handle(parsed);
    } catch (error) {
      this.deps.log.error({ err: error }, 'websocket: message handling failed');
      this.error('internal_error', 'The message could not be handled; try again.');
    }
  }

  private async handle(message: ClientMessage) {
    if (message.type === 'ping') return this.send({ type: 'pong' });
    if (message.type === 'auth') return this.authenticate(message.token);
    if (!this.principal)
      return this.error('unauthorized', 'Authenticate first: {"type":"auth","token":"<platform token>"}.');
    if (message.type === 'unsubscribe') {
      this.subscriptions.get(message.jobId)?.unsubscribe();
      this.subscriptions.delete(message.jobId);
      return this.send({ type: 'unsubscribed', jobId: message.jobId });
    }
    return this.subscribe(message.jobId, this.principal);
  }

  private async authenticate(token: string) {
    let principal: SessionPrincipal;
    try {
      principal = await this.deps.authenticate(token);
    } catch (error) {
      if (!(error instanceof InvalidTokenError)) {
        if (!isDatabaseUnavailable(error)) throw error;
        return this.error('unavailable', UNAVAILABLE);
      }
      // A refused renewal leaves the current token in force until its expiry.
      if (this.principal) return this.error('unauthorized', `The new token was refused: ${error.message}.`);
      this.error('unauthorized', 'The token is invalid or expired.');
      return this.close(CLOSE.unauthorized, 'invalid token');
    }
    if (this.principal && principal.userId !== this.principal.userId) {
      return this.error('unauthorized', 'The token is for another user; a connection stays with one user.');
    }
    this.ready(principal);
  }

  private async subscribe(jobId: string, principal: SessionPrincipal) {
    if (this.subscriptions.has(jobId)) return;
    if (this.subscriptions.size >= this.deps.config.ws.maxSubscriptions) {
      return this.error(
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
      row = await this.readJob(jobId, principal.userId);
    } catch (error) {
      // Never leave a failed subscription behind: it would swallow every later subscribe.
      const ours = this.subscriptions.get(jobId) === sub;
      this.drop(jobId, sub);
      if (!ours) return;
      if (isDatabaseUnavailable(error)) return this.error('unavailable', UNAVAILABLE, jobId);
      this.deps.log.error({ err: error, jobId }, 'websocket: reading a job failed');
      return this.error('internal_error', 'The job could not be read; subscribe again.', jobId);
    }
    if (this.subscriptions.get(jobId) !== sub) return; // unsubscribed or closed meanwhile
    if (!row) {
      // Exactly what a missing job gets, whether it is absent or another tenant's.
      this.drop(jobId, sub);
      return this.error('not_found', 'No such job.', jobId);
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

  private flushDeltas() {
    if (this.outbox.length === 0) return;
    const deltas = this.outbox;
    this.outbox = [];
    this.send({ type: 'deltas', deltas });
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
    this.send({ type: 'job', job: toJobStatus(row) });
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
        this.error('not_found', 'No such job.', jobId);
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
