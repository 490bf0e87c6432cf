// One websocket connection: authentication, job subscriptions (kept in
// subscriptions.ts), delivery.
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
import type { JobEventHub } from '../../../core/jobs/events.ts';
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
import { JobSubscriptions } from './subscriptions.ts';

export { CLOSE, type SessionPrincipal } from './protocol.ts';

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
  private readonly jobs: JobSubscriptions;
  private badFrames = 0;
  private authTimer: NodeJS.Timeout | null = null;
  private expiryTimer: NodeJS.Timeout | null = null;
  private disposed = false;
  alive = true;

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: SessionDeps,
    principal: SessionPrincipal | null,
  ) {
    this.jobs = new JobSubscriptions(deps, {
      send: (message) => this.send(message),
      error: (code, message, jobId) => this.error(code, message, jobId),
    });
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
    this.jobs.clear();
  }

  private send(message: unknown) {
    // Deltas gathered so far go first: nothing of a job may follow its final state.
    if ((message as { type?: string }).type !== 'deltas') this.jobs.flushDeltas();
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
      this.jobs.unsubscribe(message.jobId);
      return this.send({ type: 'unsubscribed', jobId: message.jobId });
    }
    return this.jobs.subscribe(message.jobId, this.principal.userId);
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
      if (this.principal) return this.error('unauthorized', `The new token was refused (${error.message}).`);
      this.error('unauthorized', 'The token is invalid or expired.');
      return this.close(CLOSE.unauthorized, 'invalid token');
    }
    if (this.principal && principal.userId !== this.principal.userId) {
      return this.error('unauthorized', 'The token is for another user; a connection stays with one user.');
    }
    this.ready(principal);
  }

  holdTenant(tenantId: string) {
    this.jobs.holdTenant(tenantId);
  }

  releaseTenant(tenantId: string, stillMember: boolean) {
    this.jobs.releaseTenant(tenantId, stillMember);
  }

  subscribedTenants(): Set<string> {
    return this.jobs.subscribedTenants();
  }
}
