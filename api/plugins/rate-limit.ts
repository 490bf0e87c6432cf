// `onRequest: app.rateLimit(LIMITS.contact)`: counts every request to the route
// (malformed ones too) per client IP, before anything else runs. The client
// IP honours X-Forwarded-For only when TRUST_PROXY is set.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hitRateLimit, type RateLimitRule } from '../../core/rate-limit.ts';
import { RateLimitedError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyInstance {
    rateLimit: (
      rule: RateLimitRule,
      keyOf?: (request: FastifyRequest) => string,
    ) => (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

async function rateLimitPlugin(app: FastifyInstance) {
  app.decorate('rateLimit', (rule: RateLimitRule, keyOf: (request: FastifyRequest) => string = (r) => r.ip) => {
    return async (request: FastifyRequest, reply: FastifyReply) => {
      const decision = await hitRateLimit(app.db, rule, keyOf(request));
      reply.header('ratelimit-limit', String(rule.limit));
      reply.header('ratelimit-remaining', String(decision.remaining));
      if (!decision.allowed) {
        request.log.warn({ bucket: rule.bucket, retryAfter: decision.retryAfterSeconds }, 'rate limit exceeded');
        throw new RateLimitedError(decision.retryAfterSeconds);
      }
    };
  });
}

export default fp(rateLimitPlugin, { name: 'rate-limit', dependencies: ['context'] });
