// What the activity routes share: the Viewer guard, the OpenAPI basics and
// the answer to a cursor that is not one of the list's.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { InvalidActivityCursorError } from '../../../core/activity/cursor.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';

/** The app as the activity routes' plugin receives it (Zod type provider). */
export type ActivityApp = Parameters<FastifyPluginAsyncZod>[0];

export const badCursor = () =>
  new PlatformHttpError(400, 'invalid_request', 'Invalid request: query.cursor: not a cursor from this list.');
export async function paging<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidActivityCursorError) throw badCursor();
    throw error;
  }
}

/** The guard, error responses and OpenAPI basics of one plugin instance. */
export function activityRouteContext(app: ActivityApp) {
  const viewer = { onRequest: app.requireUser, preValidation: app.requireTenant('viewer') };
  const errors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };
  const common = { tags: ['activity'], security: [{ PlatformJWT: [] }], headers: TenantHeaders };
  return { viewer, errors, common };
}

export type ActivityRouteContext = ReturnType<typeof activityRouteContext>;
