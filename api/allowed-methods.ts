// Which methods a path has routes for: a request with another method gets
// 405 and an Allow header rather than "no route" (the path does exist).
// Fastify's router answers only for a method, so the patterns are kept here
// as they are registered (`:param` one segment, `*` the rest).
import type { FastifyInstance } from 'fastify';

export type AllowedMethods = (path: string) => string[];

const patternOf = (url: string) =>
  new RegExp(
    `^${url
      .split(/(:[A-Za-z0-9_]+|\*)/)
      .map((part) =>
        part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('')}/?$`,
  );

/** Call before any route is registered: it watches them all. */
export function watchRoutes(app: FastifyInstance): AllowedMethods {
  const routes: Array<{ methods: string[]; pattern: RegExp }> = [];
  app.addHook('onRoute', (route) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map(String);
    routes.push({ methods, pattern: patternOf(route.url) });
  });
  return (path) => {
    const allowed = new Set<string>();
    for (const route of routes) if (route.pattern.test(path)) for (const m of route.methods) allowed.add(m);
    return [...allowed].sort();
  };
}
