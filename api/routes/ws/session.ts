// One websocket connection: authentication, job subscriptions, delivery.
//
// Protocol (JSON text frames):
//   client -> {type:"auth", token} (only when no Authorization header was sent)
//             {type:"subscribe", jobId} | {type:"unsubscribe", jobId} | {type:"ping"}
//   server -> {type:"ready", userId} | {type:"job", job: JobStatus} | {type:"pong"}
//             {type:"unsubscribed", jobId} | {type:"error", code, message, jobId?}
// A subscription first delivers the job as it is now, then every change in
// order; it ends by itself after the final state.
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import type { PlatformPrincipal } from '../../../core/auth/platform-token.ts';
import type { Config } from '../../../core/config.ts';
import type { DatabasePool } from '../../../core/db/pool.ts';
import type { JobEventHub } from '../../../core/jobs/events.ts';
import { findJobForUser } from '../../../core/jobs/read.ts';
import { isFinal, toJobStatus, type JobRow } from '../../../core/jobs/schema.ts';

export const CLOSE = {
  shutdown: 1001,
  policy: 1008,
  slowConsumer: 4008,
  unauthorized: 4401,
} as const;

const ClientMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auth'), token: z.string().min(1).max(8192) }),
  z.object({ type: z.literal('subscribe'), jobId: z.uuid() }),
  z.object({ type: z.literal('unsubscribe'), jobId: z.uuid() }),
  z.object({ type: z.literal('ping') }),
]);

const MAX_BAD_FRAMES = 20;

type Subscription = {
  lastVersion: number;
  /** Events that arrive before the snapshot is read are held, then filtered by version. */
  pending: JobRow[] | null;
  unsubscribe: () => void;
};

export type SessionDeps = {
  config: Config;
  db: DatabasePool;
  hub: JobEventHub;
  log: FastifyBaseLogger;
  authenticate: (token: string) => Promise<PlatformPrincipal>;
};

export class WsSession {
  private principal: PlatformPrincipal | null = null;
  private subscriptions = new Map<string, Subscription>();
  private badFrames = 0;
  private authTimer: NodeJS.Timeout | null = null;
  alive = true;

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: SessionDeps,
    principal: PlatformPrincipal | null,
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

  private ready(principal: PlatformPrincipal) {
    this.principal = principal;
    if (this.authTimer) clearTimeout(this.authTimer);
    this.authTimer = null;
    this.send({ type: 'ready', userId: principal.userId });
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
    if (this.authTimer) clearTimeout(this.authTimer);
    for (const sub of this.subscriptions.values()) sub.unsubscribe();
    this.subscriptions.clear();
  }

  private send(message: unknown) {
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
    let parsed: z.infer<typeof ClientMessage>;
    try {
      if (isBinary) throw new Error('binary frames are not accepted; send JSON text');
      const result = ClientMessage.safeParse(JSON.parse(String(data)));
      if (!result.success) {
        const issue = result.error.issues[0];
        throw new Error(`${issue?.path.join('.') || 'message'}: ${issue?.message ?? 'invalid'}`);
      }
      parsed = result.data;
    } catch (error) {
      this.badFrames++;
      const reason = error instanceof SyntaxError ? 'not valid JSON' : (error as Error).message;
      this.error('invalid_message', `Message refused: ${reason}. Expected {"type":"subscribe","jobId":"<uuid>"}, "unsubscribe" or "ping".`);
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

  private async handle(message: z.infer<typeof ClientMessage>) {
    if (message.type === 'ping') return this.send({ type: 'pong' });
    if (message.type === 'auth') {
      if (this.principal) return this.error('invalid_message', 'Already authenticated.');
      try {
        this.ready(await this.deps.authenticate(message.token));
      } catch {
        this.error('unauthorized', 'The token is invalid or expired.');
        this.close(CLOSE.unauthorized, 'invalid token');
      }
      return;
    }
    if (!this.principal) return this.error('unauthorized', 'Authenticate first: {"type":"auth","token":"<platform token>"}.');
    if (message.type === 'unsubscribe') {
      this.subscriptions.get(message.jobId)?.unsubscribe();
      this.subscriptions.delete(message.jobId);
      return this.send({ type: 'unsubscribed', jobId: message.jobId });
    }
    return this.subscribe(message.jobId, this.principal);
  }

  private async subscribe(jobId: string, principal: PlatformPrincipal) {
    if (this.subscriptions.has(jobId)) return;
    if (this.subscriptions.size >= this.deps.config.ws.maxSubscriptions) {
      return this.error('too_many_subscriptions', `At most ${this.deps.config.ws.maxSubscriptions} jobs per connection; unsubscribe from finished ones.`, jobId);
    }
    // Listen before reading, so a change between the read and the listen is not lost.
    const sub: Subscription = { lastVersion: 0, pending: [], unsubscribe: () => undefined };
    sub.unsubscribe = this.deps.hub.subscribe(jobId, (row) => this.deliver(jobId, sub, row));
    this.subscriptions.set(jobId, sub);

    const row = await findJobForUser(this.deps.db, jobId, principal.userId);
    if (this.subscriptions.get(jobId) !== sub) return; // unsubscribed or closed meanwhile
    if (!row) {
      // Exactly what a missing job gets, whether it is absent or another tenant's.
      this.drop(jobId, sub);
      return this.error('not_found', 'No such job.', jobId);
    }
    const held = sub.pending ?? [];
    sub.pending = null;
    this.deliver(jobId, sub, row);
    for (const later of held) this.deliver(jobId, sub, later);
  }

  private deliver(jobId: string, sub: Subscription, row: JobRow) {
    if (sub.pending) {
      sub.pending.push(row);
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
}
