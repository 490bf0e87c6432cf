// Messaging channels (telegram, slack, webhook): statuses, link and its
// long-poll, enable/disable/disconnect, per-channel settings and the
// channel's jobs. Inbound requests from the channels are in inbound.ts.
import fp from 'fastify-plugin';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { LinkWaiters } from '../../../core/channels/waiters.ts';
import { registerChannelConfigRoutes } from './config.ts';
import { channelRouteContext } from './context.ts';
import { registerChannelLinkRoutes } from './link.ts';
import { registerChannelStatusRoutes } from './status.ts';
import { registerChannelSwitchRoutes } from './switches.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** This process's link/wait waiters (tests count them). */
    channelWaiters: LinkWaiters;
  }
}

const channelRoutes: FastifyPluginAsyncZod = async (app) => {
  const shared = channelRouteContext(app);
  const waiters = new LinkWaiters(app.jobEvents);
  await waiters.start();
  app.decorate('channelWaiters', waiters);
  const context = { ...shared, waiters };

  registerChannelStatusRoutes(app, context);
  registerChannelLinkRoutes(app, context);
  registerChannelSwitchRoutes(app, context);
  registerChannelConfigRoutes(app, context);
};

// Not encapsulated: the waiter registry is visible on the app (tests, metrics).
export default fp(channelRoutes, { name: 'channel-routes' });
