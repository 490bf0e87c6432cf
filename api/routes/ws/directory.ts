// Which websocket sessions belong to which user, so a change to a user or a
// membership reaches that user's sockets. One LISTEN handler per api process
// (on the hub's shared connection), dispatched by userId: a socket costs a
// map entry, not a listener. The triggers of
// sql/migrations/0007_session_cache_events.sql send `user:<userId>` (deleted,
// operator flag changed) and `member:<tenantId>:<userId>` (any membership change).
import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import { sql, type DatabasePool } from '../../../core/db/pool.ts';
import type { JobEventHub } from '../../../core/jobs/events.ts';

const CHANNEL = 'user_cache_events';

/** What the directory needs of a session. */
export interface DirectorySession {
  /** Close the socket (the session removes itself from the directory). */
  close(code: number, reason: string): void;
  /** A membership of this session's user in the tenant may have changed: hold its jobs' updates. */
  holdTenant(tenantId: string): void;
  /** The check is done: resume the tenant's updates, or end them when the user is no longer a member. */
  releaseTenant(tenantId: string, stillMember: boolean): void;
  /** Tenants of the jobs this session follows. */
  subscribedTenants(): Set<string>;
}

export const CLOSE_ACCOUNT_GONE = 'account no longer exists';
const CLOSE_RECHECK_FAILED = 'access could not be re-checked; reconnect';

export class SessionDirectory {
  private byUser = new Map<string, Set<DirectorySession>>();
  private stopped = false;
  private readonly unwatch: () => void;

  constructor(
    private readonly db: DatabasePool,
    hub: JobEventHub,
    private readonly log: FastifyBaseLogger,
    private readonly codes: { unauthorized: number; tryAgainLater: number },
  ) {
    void hub.listen(CHANNEL, (payload) => void this.onEvent(payload));
    // Notifications sent while the LISTEN connection was down are lost: check everyone again.
    this.unwatch = hub.onConnectionChange((connected) => {
      if (connected) void this.recheckAll();
    });
  }

  add(userId: string, session: DirectorySession) {
    let set = this.byUser.get(userId);
    if (!set) {
      set = new Set();
      this.byUser.set(userId, set);
    }
    set.add(session);
  }

  remove(userId: string, session: DirectorySession) {
    const set = this.byUser.get(userId);
    if (!set) return;
    set.delete(session);
    if (set.size === 0) this.byUser.delete(userId);
  }

  /** Sessions per user, for tests and metrics. */
  count(userId: string): number {
    return this.byUser.get(userId)?.size ?? 0;
  }

  stop() {
    this.stopped = true;
    this.unwatch();
  }

  private async onEvent(payload: string) {
    if (this.stopped) return;
    const [kind, first, second] = payload.split(':');
    if (kind === 'user' && first) return this.checkUser(first);
    if (kind === 'member' && first && second) return this.checkMembership(first, second);
  }

  private async checkUser(userId: string) {
    const sessions = this.byUser.get(userId);
    if (!sessions) return;
    try {
      const exists = await this.db.exists(sql.unsafe`select 1 from users where id = ${userId}`);
      if (!exists) this.closeAll(userId, this.codes.unauthorized, CLOSE_ACCOUNT_GONE);
    } catch (error) {
      this.log.warn({ err: error, userId }, 'websocket: could not re-check a user; closing their sockets');
      this.closeAll(userId, this.codes.tryAgainLater, CLOSE_RECHECK_FAILED);
    }
  }

  private async checkMembership(tenantId: string, userId: string) {
    const sessions = [...(this.byUser.get(userId) ?? [])];
    if (sessions.length === 0) return;
    for (const s of sessions) s.holdTenant(tenantId);
    let member: boolean;
    try {
      member = await this.db.exists(
        sql.unsafe`select 1 from tenant_memberships where tenant_id = ${tenantId} and user_id = ${userId}`,
      );
    } catch (error) {
      this.log.warn(
        { err: error, userId, tenantId },
        'websocket: could not re-check a membership; closing the sockets',
      );
      for (const s of sessions) s.close(this.codes.tryAgainLater, CLOSE_RECHECK_FAILED);
      return;
    }
    for (const s of sessions) s.releaseTenant(tenantId, member);
  }

  private async recheckAll() {
    const userIds = [...this.byUser.keys()];
    if (this.stopped || userIds.length === 0) return;
    try {
      const ids = sql.array(userIds, 'uuid');
      const present = new Set(
        await this.db.anyFirst(sql.type(z.object({ id: z.string() }))`select id from users where id = any(${ids})`),
      );
      const rows = await this.db.any(sql.type(z.object({ tenant_id: z.string(), user_id: z.string() }))`
        select tenant_id, user_id from tenant_memberships where user_id = any(${ids})`);
      const members = new Set(rows.map((r) => `${r.tenant_id}:${r.user_id}`));
      for (const userId of userIds) {
        if (!present.has(userId)) {
          this.closeAll(userId, this.codes.unauthorized, CLOSE_ACCOUNT_GONE);
          continue;
        }
        for (const s of this.byUser.get(userId) ?? []) {
          for (const tenantId of s.subscribedTenants()) {
            if (members.has(`${tenantId}:${userId}`)) continue;
            s.holdTenant(tenantId);
            s.releaseTenant(tenantId, false);
          }
        }
      }
    } catch (error) {
      // Unverified sockets are not kept: their clients reconnect and authenticate again.
      this.log.warn(
        { err: error },
        'websocket: could not re-check access after the LISTEN connection came back; closing sockets',
      );
      for (const userId of userIds) this.closeAll(userId, this.codes.tryAgainLater, CLOSE_RECHECK_FAILED);
    }
  }

  private closeAll(userId: string, code: number, reason: string) {
    for (const s of [...(this.byUser.get(userId) ?? [])]) s.close(code, reason);
  }
}
