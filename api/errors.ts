// Errors are data: one class and one body shape per surface of the spec.
//   platform  (/api/..., /oauth/...)      {error, status, message?, details?}
//   agent     (/api/agent/v1/..., /mcp)    {code, message, next_action, ...}
//   identity  ({auth_url} endpoints)       {code, message, retry_after?}
import { z } from 'zod';
import { decodeCursor, InvalidCursorError, type Position } from '../core/paging.ts';

export type Surface = 'platform' | 'agent' | 'identity';

const IDENTITY_PREFIXES = [
  '/agent/identity',
  '/oauth2/',
  '/.well-known/oauth-authorization-server',
  '/.well-known/jwks.json',
];

/** The path as the router sees it (percent-decoded), so /m%63p is /mcp here too. */
function decodedPath(url: string): string {
  const raw = url.split('?')[0] ?? url;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

export function surfaceOf(url: string): Surface {
  const path = decodedPath(url);
  // The MCP endpoint mirrors the Agent API, so its HTTP refusals share its shape.
  if (path === '/api/agent' || path.startsWith('/api/agent/') || path === '/mcp') return 'agent';
  if (IDENTITY_PREFIXES.some((p) => path === p || path.startsWith(p))) return 'identity';
  return 'platform';
}

export const ValidationIssue = z
  .object({ path: z.string().describe('Where in the request, e.g. body.email or query.limit'), message: z.string() })
  .meta({ id: 'ValidationIssue' });
export type ValidationIssue = z.infer<typeof ValidationIssue>;

export const PlatformError = z
  .object({
    error: z.string().describe('Short machine-readable code, e.g. not_found'),
    status: z.int().describe('The HTTP status, repeated'),
    message: z.string().optional().describe('What went wrong and what to do, for a person'),
    details: z.array(ValidationIssue).optional(),
  })
  .meta({ id: 'PlatformError', description: 'Error body of the platform API' });
export type PlatformErrorBody = z.infer<typeof PlatformError>;

export const IDEMPOTENCY_KEY_BOUNDS = { min: 8, max: 200 } as const;
export const INVALID_IDEMPOTENCY_KEY =
  'Send an Idempotency-Key header of 8-200 characters, unique to this exact mutation.';

/** The safe next action an agent can take after a refusal. */
export const NEXT_ACTIONS = [
  'fix_request',
  'reauthenticate',
  'claim_account',
  'change_plan',
  'request_scope',
  'raise_claimer_role',
  'use_allowed_model',
  'restore_account_access',
  'reread_list',
  'retry_same_request_later',
  'use_new_idempotency_key',
  'complete_setup',
  'await_approval',
  'retry_later',
  'contact_support',
] as const;
export type NextAction = (typeof NEXT_ACTIONS)[number];

export const AgentApiError = z
  .object({
    code: z.string().describe('Machine-readable refusal code from the Agent API error table'),
    message: z.string(),
    next_action: z.enum(NEXT_ACTIONS).describe('The safe next action'),
    details: z.array(ValidationIssue).optional(),
    retry_after: z.int().min(0).optional(),
  })
  .meta({ id: 'AgentApiError', description: 'Error body of the Agent API' });
export type AgentApiErrorBody = z.infer<typeof AgentApiError>;

export const SharedRateLimitError = z
  .object({
    code: z.literal('rate_limit_exceeded'),
    message: z.string(),
    next_action: z.literal('retry_same_request_later'),
    retry_after: z.int().min(0).describe('Seconds; also in the Retry-After header'),
    limit: z.int().describe('Requests allowed per window for this principal'),
    window_seconds: z.int(),
  })
  .meta({
    id: 'SharedRateLimitError',
    description: 'The shared admission limit of the Agent API refused the request before it reached the route',
  });

export const IdentityError = z
  .object({
    code: z.string(),
    message: z.string(),
    retry_after: z.int().min(0).optional().describe('Seconds to wait after rate_limit_exceeded'),
  })
  .meta({ id: 'IdentityError', description: 'Error body of the identity provider' });
export type IdentityErrorBody = z.infer<typeof IdentityError>;

/** Thrown by platform routes; rendered as {error, status, message}. */
export class PlatformHttpError extends Error {
  override name = 'PlatformHttpError';
  constructor(
    public readonly status: number,
    public readonly code: string,
    message: string,
    public readonly headers: Record<string, string> = {},
    /** For a 400 found by a check of our own that the validator would otherwise have made. */
    public readonly details?: ValidationIssue[],
  ) {
    super(message);
  }
}

/** A platform list's `?cursor=` as a position, or 400 invalid_request saying the cursor is not from that list. */
export function platformCursor(cursor: string | undefined): Position | null {
  if (!cursor) return null;
  return cursorChecked(() => decodeCursor(cursor));
}

/** Runs a list read whose core decodes the cursor itself; a cursor it did not issue is a 400. */
export async function pageOr400<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw error instanceof InvalidCursorError ? cursorRefused() : error;
  }
}

function cursorChecked<T>(decode: () => T): T {
  try {
    return decode();
  } catch (error) {
    throw error instanceof InvalidCursorError ? cursorRefused() : error;
  }
}

const cursorRefused = () =>
  new PlatformHttpError(400, 'invalid_request', 'Invalid request: query.cursor: not a cursor from this list.');

export class AgentHttpError extends Error {
  override name = 'AgentHttpError';
  constructor(
    public readonly status: number,
    public readonly code: string,
    message: string,
    public readonly nextAction: NextAction,
    public readonly headers: Record<string, string> = {},
    /**
     * False for refusals given before the operation started (rule 6: a
     * readiness refusal): the idempotency record is dropped, so the identical
     * retry runs once the cause is gone. Other refusals are replayed as recorded.
     */
    public readonly recordIdempotency = true,
    /** Named facts about the refusal, e.g. a readiness reason: [{path: 'reason', message: 'runner_offline'}]. */
    public readonly details?: ValidationIssue[],
  ) {
    super(message);
  }

  /** The AgentApiError body: the same over HTTP and as an MCP tool error. */
  body(): AgentApiErrorBody {
    return {
      code: this.code,
      message: this.message,
      next_action: this.nextAction,
      ...(this.details ? { details: this.details } : {}),
    };
  }
}

export class IdentityHttpError extends Error {
  override name = 'IdentityHttpError';
  constructor(
    public readonly status: number,
    public readonly code: string,
    message: string,
    public readonly retryAfter?: number,
  ) {
    super(message);
  }
}

/** A shared admission limit refused the request; rendered in the surface's shape with Retry-After. */
export class RateLimitedError extends Error {
  override name = 'RateLimitedError';
  constructor(
    public readonly retryAfterSeconds: number,
    message = `Too many requests; retry in ${retryAfterSeconds} s.`,
  ) {
    super(message);
  }
}

/** Default codes and next actions per status, for errors that carry only a status. */
const STATUS_DEFAULTS: Record<number, { code: string; agentCode: string; next: NextAction; message: string }> = {
  400: {
    code: 'invalid_request',
    agentCode: 'invalid_request',
    next: 'fix_request',
    message: 'The request is malformed.',
  },
  401: {
    code: 'unauthorized',
    agentCode: 'invalid_credential',
    next: 'reauthenticate',
    message: 'Authentication is missing or invalid.',
  },
  403: { code: 'forbidden', agentCode: 'scope_denied', next: 'request_scope', message: 'Not allowed.' },
  404: { code: 'not_found', agentCode: 'not_found', next: 'reread_list', message: 'Not found.' },
  405: {
    code: 'method_not_allowed',
    agentCode: 'invalid_request',
    next: 'fix_request',
    message: 'Method not allowed.',
  },
  406: { code: 'not_acceptable', agentCode: 'invalid_request', next: 'fix_request', message: 'Not acceptable.' },
  409: { code: 'conflict', agentCode: 'idempotency_conflict', next: 'use_new_idempotency_key', message: 'Conflict.' },
  413: {
    code: 'payload_too_large',
    agentCode: 'invalid_request',
    next: 'fix_request',
    message: 'The request body is too large.',
  },
  415: {
    code: 'unsupported_media_type',
    agentCode: 'invalid_request',
    next: 'fix_request',
    message: 'Unsupported content type; send JSON.',
  },
  429: {
    code: 'rate_limited',
    agentCode: 'rate_limit_exceeded',
    next: 'retry_same_request_later',
    message: 'Too many requests.',
  },
  503: {
    code: 'unavailable',
    agentCode: 'temporarily_disabled',
    next: 'retry_later',
    message: 'Temporarily unavailable.',
  },
};

export function defaultsFor(status: number) {
  return (
    STATUS_DEFAULTS[status] ??
    (status >= 500
      ? {
          code: 'internal_error',
          agentCode: 'internal_error',
          next: 'retry_later' as const,
          message: 'Unexpected server error.',
        }
      : {
          code: 'invalid_request',
          agentCode: 'invalid_request',
          next: 'fix_request' as const,
          message: 'The request was refused.',
        })
  );
}
