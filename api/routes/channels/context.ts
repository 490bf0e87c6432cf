// What the channel routes share: the channel named in the path (404 when not
// supported), and the guards, error responses and keyring of the plugin.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { adapterFor, CHANNEL_IDS } from '../../../core/channels/registry.ts';
import type { ChannelAdapter } from '../../../core/channels/types.ts';
import type { LinkWaiters } from '../../../core/channels/waiters.ts';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

/** The app as the channel routes' plugin receives it (Zod type provider). */
export type ChannelApp = Parameters<FastifyPluginAsyncZod>[0];

export function channelOr404(channel: string): ChannelAdapter {
  const adapter = adapterFor(channel);
  if (!adapter)
    throw new PlatformHttpError(
      404,
      'not_found',
      `No channel "${channel}". Supported channels: ${CHANNEL_IDS.join(', ')}.`,
    );
  return adapter;
}

/** The guards, error responses, OpenAPI basics and keyring of one plugin instance. */
export function channelRouteContext(app: ChannelApp) {
  const security = [{ PlatformJWT: [] }];
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireTenant('admin') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const keyring = Keyring.fromConfig(app.config);
  const base = { tags: ['channels'], security, headers: TenantHeaders };
  return { viewer, admin, errors, keyring, base };
}

export type ChannelRouteContext = ReturnType<typeof channelRouteContext> & { waiters: LinkWaiters };
