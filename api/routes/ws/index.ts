// GET /api/ws (websocket): follow jobs live. Authenticate with the
// Authorization header on the upgrade request, or with a first
// {type:"auth"} message; never with a token in the URL.
import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerToken, InvalidTokenError } from '../../../core/auth/platform-token.ts';
import { PlatformHttpError } from '../../errors.ts';
import { consoleLiveRoutes } from '../console/live.ts';
import { SessionDirectory } from './directory.ts';
import { CLOSE, WsSession, type SessionPrincipal } from './session.ts';

const MAX_FRAME_BYTES = 64 * 1024;

export default async function wsRoutes(app: FastifyInstance) {
  const sessions = new Set<WsSession>();
  app.metrics.countWebsockets(() => sessions.size);
  // One per process: user and membership changes reach the sockets of that user.
  const directory = new SessionDirectory(app.db, app.jobEvents, app.log, CLOSE);
  app.addHook('onClose', async () => directory.stop());
  // The header's identity with its expiry, from preValidation to the handler.
  const verified = new WeakMap<FastifyRequest, SessionPrincipal>();
  const heartbeat = setInterval(() => {
    for (const s of sessions) s.heartbeat();
  }, app.config.ws.heartbeatMs);
  heartbeat.unref();

  await app.register(websocket, {
    options: { maxPayload: MAX_FRAME_BYTES },
    // On shutdown every client gets a close frame that says why.
    preClose(done) {
      clearInterval(heartbeat);
      for (const session of sessions) session.close(CLOSE.shutdown, 'server shutting down');
      for (const client of this.websocketServer.clients) client.close(CLOSE.shutdown, 'server shutting down');
      this.websocketServer.close();
      done();
    },
  });

  // The operator console's live pages share this websocket server.
  await consoleLiveRoutes(app);

  app.get(
    '/api/ws',
    {
      websocket: true,
      schema: { hide: true },
      // A bad header is refused before the upgrade, as a plain 401.
      preValidation: async (request) => {
        if (request.headers.authorization === undefined) return;
        const token = bearerToken(request.headers.authorization);
        if (!token)
          throw new PlatformHttpError(401, 'unauthorized', 'Authorization must be `Bearer <platform token>`.');
        try {
          const user = await app.authenticateToken(token);
          request.user = user;
          verified.set(request, user);
        } catch (error) {
          if (error instanceof InvalidTokenError)
            throw new PlatformHttpError(401, 'unauthorized', `The platform token was refused (${error.message}).`);
          throw error;
        }
      },
    },
    (socket, request) => {
      if (app.shuttingDown) {
        socket.close(CLOSE.shutdown, 'server shutting down');
        return;
      }
      const session = new WsSession(
        socket,
        {
          config: app.config,
          db: app.db,
          hub: app.jobEvents,
          log: request.log,
          authenticate: app.authenticateToken,
          directory,
        },
        verified.get(request) ?? null,
      );
      sessions.add(session);
      socket.on('close', () => sessions.delete(session));
    },
  );
}
