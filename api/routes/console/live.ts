// GET /console/live (websocket): keeps an open console page current. The
// page says which path it shows; this process renders that page's live part
// again when something it may show changes, and sends it only if it differs
// from what that socket has. What changes is heard, not polled: every job
// change (job_events), Graphile Worker's jobs:insert, and console_events
// (worker processes, cron runs, operator actions, suspensions; 0041). One
// render per path serves every socket on it, at most once a second however
// busy the platform; a 5-second tick refreshes ages and stale marks, and
// checks that each socket's person is still an operator.
import type { FastifyInstance } from 'fastify';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { sql } from '../../../core/db/pool.ts';
import { PlatformHttpError } from '../../errors.ts';
import type { PageSessions } from '../../pages/session.ts';
import { CONSOLE_SESSION_TTL_S, consoleSessions, consoleVisitor } from './session.ts';
import { findPage } from './views/index.ts';

const MIN_INTERVAL_MS = 1_000;
const TICK_MS = 5_000;
const MAX_SOCKETS = 200;
const CLOSE = { notOperator: 4401, unknownPage: 4404, policy: 1008, busy: 1013 } as const;

const Watch = z.object({ type: z.literal('watch'), path: z.string().min(1).max(1000).startsWith('/console') });

type Client = { userId: string; sid: string; path: string | null; last: string | null };

class ConsoleFeed {
  private readonly clients = new Map<WebSocket, Client>();
  private timer: NodeJS.Timeout | null = null;
  private tick: NodeJS.Timeout | null = null;
  private lastRefresh = 0;
  private refreshing: Promise<void> | null = null;
  private again = false;
  private listening = false;

  constructor(
    private readonly app: FastifyInstance,
    private readonly sessions: PageSessions,
  ) {}

  add(socket: WebSocket, userId: string, sid: string): void {
    if (this.clients.size >= MAX_SOCKETS) {
      socket.close(CLOSE.busy, 'too many console connections on this server; try again later');
      return;
    }
    this.clients.set(socket, { userId, sid, path: null, last: null });
    // A socket outlives no session: at the session's longest life the page reloads (and asks to sign in again).
    const expiry = setTimeout(() => socket.close(CLOSE.notOperator, 'session expired'), CONSOLE_SESSION_TTL_S * 1000);
    expiry.unref();
    socket.on('close', () => {
      clearTimeout(expiry);
      this.clients.delete(socket);
      if (this.clients.size === 0) this.idle();
    });
    socket.on('message', (data, isBinary) => this.onMessage(socket, data, isBinary));
    this.start();
  }

  stop(): void {
    this.idle();
    for (const socket of this.clients.keys()) socket.close(1001, 'server shutting down');
    this.clients.clear();
  }

  private start(): void {
    if (!this.listening) {
      this.listening = true;
      const hub = this.app.jobEvents;
      hub.onAnyJobChange(() => this.signal());
      void hub.listen('jobs:insert', () => this.signal());
      void hub.listen('console_events', () => this.signal());
    }
    this.tick ??= setInterval(() => void this.onTick(), TICK_MS);
    this.tick.unref();
  }

  private idle(): void {
    if (this.tick) clearInterval(this.tick);
    if (this.timer) clearTimeout(this.timer);
    this.tick = null;
    this.timer = null;
  }

  private onMessage(socket: WebSocket, data: unknown, isBinary: boolean): void {
    const client = this.clients.get(socket);
    if (!client) return;
    let parsed: z.ZodSafeParseResult<z.infer<typeof Watch>> | null = null;
    try {
      parsed = isBinary ? null : Watch.safeParse(JSON.parse(String(data)));
    } catch {
      parsed = null;
    }
    if (!parsed?.success) {
      socket.close(CLOSE.policy, 'send {"type":"watch","path":"/console/..."}');
      return;
    }
    if (!findPage(parsed.data.path)) {
      socket.close(CLOSE.unknownPage, 'no such console page');
      return;
    }
    client.path = parsed.data.path;
    client.last = null;
    void this.renderPath(parsed.data.path);
  }

  /** Something changed: refresh soon, at most once per MIN_INTERVAL_MS. */
  private signal(): void {
    if (this.clients.size === 0 || this.timer) return;
    const wait = Math.max(100, MIN_INTERVAL_MS - (Date.now() - this.lastRefresh));
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.refresh();
    }, wait);
    this.timer.unref();
  }

  private async refresh(): Promise<void> {
    if (this.refreshing !== null) {
      this.again = true;
      return this.refreshing;
    }
    this.lastRefresh = Date.now();
    this.refreshing = (async () => {
      const paths = new Set([...this.clients.values()].map((c) => c.path).filter((p): p is string => p !== null));
      for (const path of paths) await this.renderPath(path);
    })().finally(() => {
      this.refreshing = null;
      if (this.again) {
        this.again = false;
        this.signal();
      }
    });
    return this.refreshing;
  }

  /** Renders one page's live part and sends it to the sockets on it that do not have it yet. */
  private async renderPath(path: string): Promise<void> {
    const found = findPage(path);
    if (!found) return;
    let rendered: string;
    try {
      const view = await found.page.view(
        { db: this.app.db, config: this.app.config, csrf: null },
        { params: found.params, query: found.query },
      );
      rendered = view ? view.live.value : '<p>This no longer exists. It may have been removed by retention.</p>';
    } catch (error) {
      this.app.log.debug(
        { err: error, path },
        'console: a live view could not be rendered; the next change tries again',
      );
      return;
    }
    const message = JSON.stringify({ type: 'live', html: rendered, at: new Date().toISOString() });
    for (const [socket, client] of this.clients) {
      if (client.path !== path || client.last === rendered || socket.readyState !== socket.OPEN) continue;
      client.last = rendered;
      socket.send(message);
    }
  }

  private async onTick(): Promise<void> {
    const ids = [...new Set([...this.clients.values()].map((c) => c.userId))];
    if (ids.length === 0) return;
    try {
      const operators = new Set(
        await this.app.db.anyFirst(sql.type(z.object({ id: z.string() }))`
        select id from users where id = any(${sql.array(ids, 'uuid')}) and is_operator`),
      );
      const live = await this.sessions.live([...new Set([...this.clients.values()].map((c) => c.sid))]);
      for (const [socket, client] of this.clients) {
        if (!live.has(client.sid)) socket.close(CLOSE.notOperator, 'signed out');
        else if (!operators.has(client.userId)) socket.close(CLOSE.notOperator, 'no longer an operator');
        else socket.ping();
      }
    } catch (error) {
      this.app.log.debug({ err: error }, 'console: operators could not be checked; trying again at the next tick');
      return;
    }
    await this.refresh();
  }
}

/** Registers the route; call inside the context that registered @fastify/websocket. */
export async function consoleLiveRoutes(app: FastifyInstance): Promise<void> {
  const sessions = consoleSessions(app.config, app.db);
  const feed = new ConsoleFeed(app, sessions);
  app.addHook('onClose', async () => feed.stop());
  const operators = new WeakMap<object, { userId: string; sid: string }>();
  app.get(
    '/console/live',
    {
      websocket: true,
      schema: { hide: true },
      // Before the upgrade: from a console page of this origin, by an operator.
      preValidation: async (request) => {
        const origin = request.headers.origin;
        let sameOrigin = false;
        try {
          sameOrigin = !!origin && new URL(origin).host === request.host;
        } catch {
          sameOrigin = false;
        }
        if (!sameOrigin) throw new PlatformHttpError(403, 'forbidden', 'The console connects from its own pages only.');
        const visitor = await consoleVisitor(app.db, sessions, request);
        if (visitor.kind === 'anonymous')
          throw new PlatformHttpError(401, 'unauthorized', 'Sign in to the console first.');
        if (visitor.kind === 'refused')
          throw new PlatformHttpError(403, 'forbidden', 'Only the platform operator may use the console.');
        operators.set(request, { userId: visitor.user.id, sid: visitor.session.sid });
      },
    },
    (socket, request) => {
      const visitor = operators.get(request);
      if (!visitor || app.shuttingDown) {
        socket.close(1001, 'server shutting down');
        return;
      }
      feed.add(socket, visitor.userId, visitor.sid);
    },
  );
}
