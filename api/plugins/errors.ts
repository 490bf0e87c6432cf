// One error handler, three surfaces: every error leaves in the shape of the
// surface its URL belongs to. Nothing internal (stack, SQL, driver text)
// reaches a client; unexpected errors are logged with the request id and
// answered with a generic 500.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { sendNotFoundPage, wantsHtmlPage } from '../pages/not-found.ts';
import { watchRoutes } from '../allowed-methods.ts';
import { validationMessage } from '../validation-words.ts';
import { AgentSlotsExhaustedError } from '../../core/billing/entitlements.ts';
import { DATABASE_RETRY_AFTER_S, isDatabaseUnavailable } from '../../core/db/unavailable.ts';
import { QueueLimitError } from '../../core/jobs/quota.ts';
import {
  AgentHttpError,
  defaultsFor,
  IdentityHttpError,
  PlatformHttpError,
  INVALID_IDEMPOTENCY_KEY,
  RateLimitedError,
  surfaceOf,
  type NextAction,
  type ValidationIssue,
} from '../errors.ts';

/** How long a refusal at the unfinished-jobs limit suggests waiting. */
const QUEUE_LIMIT_RETRY_AFTER_S = 10;

type Rendered = {
  status: number;
  code?: string;
  message?: string;
  details?: ValidationIssue[];
  next?: NextAction;
  retryAfter?: number;
};

const CONTEXT_NAMES: Record<string, string> = { querystring: 'query', params: 'path', headers: 'header', body: 'body' };

function validationIssues(error: FastifyError): ValidationIssue[] {
  const context = CONTEXT_NAMES[error.validationContext ?? 'body'] ?? 'body';
  return (error.validation ?? []).map((issue) => {
    const where = issue.instancePath.replace(/^\//, '').replace(/\//g, '.');
    const missing = (issue.params as { missingProperty?: string } | undefined)?.missingProperty;
    return { path: [context, where || missing].filter(Boolean).join('.'), message: issue.message ?? 'invalid' };
  });
}

/** The body (and extra headers) of an error in the shape of the surface the URL belongs to. */
export function errorPayload(
  url: string,
  e: Rendered,
): { body: Record<string, unknown>; headers: Record<string, string> } {
  const surface = surfaceOf(url);
  const d = defaultsFor(e.status);
  const message = e.message ?? d.message;
  const headers: Record<string, string> = e.retryAfter !== undefined ? { 'retry-after': String(e.retryAfter) } : {};
  if (surface === 'agent') {
    return {
      headers,
      body: {
        code: e.code ?? d.agentCode,
        message,
        next_action: e.next ?? d.next,
        ...(e.details ? { details: e.details } : {}),
        ...(e.retryAfter !== undefined ? { retry_after: e.retryAfter } : {}),
      },
    };
  }
  if (surface === 'identity') {
    const code = e.code ?? d.agentCode;
    // The token endpoint also speaks plain OAuth, so stock clients read it.
    const token = url.startsWith('/oauth2/token');
    if (token) headers['cache-control'] = 'no-store';
    return {
      headers,
      body: {
        code,
        message,
        ...(token ? { error: code, error_description: message } : {}),
        ...(e.retryAfter !== undefined ? { retry_after: e.retryAfter } : {}),
      },
    };
  }
  return {
    headers,
    body: { error: e.code ?? d.code, status: e.status, message, ...(e.details ? { details: e.details } : {}) },
  };
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The error code this request was refused with, for its log line. */
    errorCode: string | null;
  }
}

export function sendError(request: FastifyRequest, reply: FastifyReply, e: Rendered): FastifyReply {
  const { body, headers } = errorPayload(request.url, e);
  const code = body.error ?? body.code;
  if (typeof code === 'string') request.errorCode = code;
  return reply.code(e.status).headers(headers).type('application/json; charset=utf-8').send(body);
}

async function errorsPlugin(app: FastifyInstance) {
  app.decorateRequest('errorCode', null);
  const allowedMethods = watchRoutes(app);
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof PlatformHttpError) {
      reply.headers(error.headers);
      return sendError(request, reply, {
        status: error.status,
        code: error.code,
        message: error.message,
        details: error.details,
      });
    }
    if (error instanceof AgentHttpError) {
      reply.headers(error.headers);
      return sendError(request, reply, {
        status: error.status,
        code: error.code,
        message: error.message,
        next: error.nextAction,
        details: error.details,
      });
    }
    if (error instanceof AgentSlotsExhaustedError) {
      // Names the add-on that lifts the limit (platform and Agent API alike).
      return sendError(request, reply, {
        status: 402,
        code: 'agent_addon_required',
        message: error.message,
        next: 'change_plan',
      });
    }
    if (error instanceof QueueLimitError) {
      // Work waits for the account's earlier work: try again once some finished.
      return sendError(request, reply, {
        status: 429,
        code: error.code,
        message: error.message,
        next: 'retry_later',
        retryAfter: QUEUE_LIMIT_RETRY_AFTER_S,
      });
    }
    if (error instanceof RateLimitedError) {
      return sendError(request, reply, { status: 429, message: error.message, retryAfter: error.retryAfterSeconds });
    }
    if (error instanceof IdentityHttpError) {
      return sendError(request, reply, {
        status: error.status,
        code: error.code,
        message: error.message,
        retryAfter: error.retryAfter,
      });
    }
    if (hasZodFastifySchemaValidationErrors(error) || error.validation) {
      const details = validationIssues(error);
      const first = details[0];
      // Agent API mutations declare Idempotency-Key as a required header;
      // a missing or malformed one has its own code (rule 5).
      if (first?.path.startsWith('header.idempotency-key') && surfaceOf(request.url) === 'agent') {
        return sendError(request, reply, {
          status: 400,
          code: 'invalid_idempotency_key',
          message: INVALID_IDEMPOTENCY_KEY,
          next: 'fix_request',
        });
      }
      return sendError(request, reply, { status: 400, message: validationMessage(details), details });
    }
    if (isDatabaseUnavailable(error)) {
      // Not a bug: PostgreSQL is down or restarting. Fast 503 with a hint
      // when to retry, on every surface; warn once per request, no stack.
      request.log.warn({ reason: (error as Error).message }, 'database unavailable; answered 503');
      return sendError(request, reply, {
        status: 503,
        code: surfaceOf(request.url) === 'agent' ? 'temporarily_disabled' : 'service_unavailable',
        message: `The service cannot reach its database right now; retry in ${DATABASE_RETRY_AFTER_S} s.`,
        next: 'retry_later',
        retryAfter: DATABASE_RETRY_AFTER_S,
      });
    }
    if (isResponseSerializationError(error)) {
      request.log.error({ err: error }, 'response did not match its schema');
      return sendError(request, reply, { status: 500 });
    }
    const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      const given = request.headers['content-type']?.split(';')[0]?.trim().slice(0, 100);
      return sendError(request, reply, {
        status: 415,
        code: surfaceOf(request.url) === 'platform' ? 'unsupported_media_type' : 'invalid_request',
        message: `Send the body as JSON with "content-type: application/json" (this request ${given ? `said ${given}` : 'named no content type'}).`,
      });
    }
    if (status >= 400 && status < 500) {
      // Fastify's own client errors (bad JSON, body too large, wrong content
      // type) carry messages written for clients.
      return sendError(request, reply, { status, message: error.message });
    }
    request.log.error({ err: error }, 'request failed');
    return sendError(request, reply, { status: status >= 500 && status <= 599 ? status : 500 });
  });

  // A browser navigating to an unknown page gets an HTML page; every API,
  // OAuth, MCP and discovery client keeps its surface's JSON 404.
  // A known path asked with another method: 405 with Allow.
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = allowedMethods(path).filter((m) => m !== 'HEAD');
    if (allowed.length > 0 && request.method !== 'OPTIONS') {
      reply.header('allow', [...allowed, ...(allowed.includes('GET') ? ['HEAD'] : [])].join(', '));
      return sendError(request, reply, {
        status: 405,
        code: surfaceOf(request.url) === 'platform' ? 'method_not_allowed' : 'invalid_request',
        message: `${path} takes ${allowed.join(', ')}, not ${request.method}.`,
        next: 'fix_request',
      });
    }
    return wantsHtmlPage(request)
      ? sendNotFoundPage(request, reply)
      : sendError(request, reply, { status: 404, message: `No route for ${request.method} ${path}` });
  });
}

export default fp(errorsPlugin, { name: 'errors' });
