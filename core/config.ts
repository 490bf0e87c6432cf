// One validated configuration for every process (api, worker, ops scripts).
// Read once from the environment; a bad value stops the process with a message
// that names the variable. Each variable is declared once, in
// core/config/groups/ (its parser, default, documentation and section of
// docs/configuration.md); this module reads them and hands consumers the
// Config below. Secrets missing in development are generated once and kept
// under DATA_DIR; in production a missing secret is a startup error.
import path from 'node:path';
import type { z } from 'zod';
import type { ExternalLoginSettings } from './external-login/settings.ts';
import type { LoginThrottleSettings } from './accounts/login-throttle.ts';
import type { TeamSettings } from './teams/settings.ts';
import type { PlanLimitSettings } from './jobs/plan-limits.ts';
import { assembleConfig } from './config/assemble.ts';
import { envSchema } from './config/declare.ts';
import { ConfigError, configError } from './config/errors.ts';
import { resolveSecrets, type SecretName } from './config/secrets.ts';
import { SETTINGS, type Env } from './config/settings.ts';

export { ConfigError } from './config/errors.ts';
export { SECRET_NAMES } from './config/secrets.ts';

export type Config = {
  nodeEnv: 'development' | 'production' | 'test';
  databaseUrl: string | undefined;
  host: string;
  port: number;
  baseUrl: string;
  authUrl: string;
  logLevel: string;
  dataDir: string;
  dbPoolMax: number;
  embeddedPgPort: number;
  trustProxy: boolean;
  shutdownTimeoutMs: number;
  worker: {
    concurrency: number;
    pollIntervalMs: number;
    heartbeatMs: number;
    staleAfterMs: number;
    sweepIntervalMs: number;
    /** Slots of the I/O pool: jobs that wait on a model or a channel (core/jobs/pools.ts). */
    ioConcurrency: number;
    /** Jobs the short pool fetches at once (at least its concurrency). */
    fetchBatch: number;
    /** Jobs the I/O pool fetches at once: small, since a full process holds them until a slot frees. */
    ioFetchBatch: number;
    /** How long a running job may take to stop after it is cancelled before it is cut off. */
    cancelGraceMs: number;
    /** A job still at work after this long is marked 'running' (quicker ones go from queued to their result). */
    runningAfterMs: number;
  };
  http: {
    /** Whole request (headers and body) must arrive within this time. */
    requestTimeoutMs: number;
    /** An idle socket is closed after this time. */
    connectionTimeoutMs: number;
    keepAliveTimeoutMs: number;
    /** 0 = unlimited. */
    maxRequestsPerSocket: number;
  };
  jobRetentionDays: number;
  /** Raw usage records (each day's totals stay in usage_daily). */
  usageRecordRetentionDays: number;
  /** Processed inbound events: Stripe and purchase webhooks, channel updates and sent replies. */
  eventRetentionDays: number;
  /** Fair-order weights and quotas per plan to write at start (only those configured). */
  planLimits: PlanLimitSettings;
  /** The login budget: failures per account and per address (core/accounts/login-throttle.ts). */
  loginThrottle: LoginThrottleSettings;
  /** Invitations' bounds and the SMTP server that mails them (core/teams/settings.ts). */
  teams: TeamSettings;
  identity: {
    /** Switches agent authentication off: the Agent API answers 503 temporarily_disabled. */
    agentAuthDisabled: boolean;
    /** Shared admission limit of /api/agent/v1: requests per window per principal. */
    agentRateLimit: number;
    agentRateWindowMs: number;
    /** Tokens an api replica takes from the shared window at once (fewer database writes, bounded unfairness). */
    agentRateLease: number;
    /** An in-progress Idempotency-Key claim whose owner stopped renewing it for this long may be taken over. */
    idempotencyLeaseMs: number;
    anonymousRegistrationDisabled: boolean;
    serviceAuthRegistrationDisabled: boolean;
    assertionTtlS: number;
    accessTokenTtlS: number;
    claimTokenTtlS: number;
  };
  ws: { heartbeatMs: number; maxBufferedBytes: number; maxSubscriptions: number; authTimeoutMs: number };
  providers: {
    timeoutMs: number;
    baseUrls: { openai: string; anthropic: string; openrouter: string; ollama: string };
    /** A tenant's own provider baseUrl may lead to private/loopback addresses (the operator's baseUrls always may). */
    allowPrivateUrls: boolean;
    /** The platform's own keys, used for tenants on platform credits. */
    platformKeys: { openai?: string; anthropic?: string; openrouter?: string };
    newTenantCreditsMicros: number;
  };
  billing: BillingConfig;
  channels: {
    /** Telegram Bot API origin (https://api.telegram.org); tests and self-hosted Bot API servers point elsewhere. */
    telegramApiBase: string;
    /** Slack Web API base (https://slack.com/api). */
    slackApiBase: string;
    /** Slack's OAuth v2 install page (https://slack.com/oauth/v2/authorize). */
    slackAuthorizeUrl: string;
    /** How long a started link (deep link, install URL, session token) stays usable. */
    linkTtlS: number;
  };
  /** The external OpenID Connect providers people log in with (partner, altidp). */
  externalLogin: ExternalLoginSettings;
  /** The directory POST /api/skills/sync reads (default DATA_DIR/skills). */
  skillsDir: string;
  /** Browser origins allowed to call the API (CORS); empty = CORS off. */
  corsOrigins: string[];
  metrics: {
    /** GET /metrics on the api's port, for a Bearer token equal to this; undefined = not on the public port. */
    token: string | undefined;
    /** A separate listener for /metrics (every process: api, worker, all-in-one); 0 = none. */
    port: number;
    host: string;
  };
  /** auto: readable lines when stdout is a terminal in development, JSON otherwise. */
  logFormat: 'auto' | 'json' | 'pretty';
  secrets: Record<SecretName, Buffer>;
  /** A retired data key that still decrypts what it sealed (rotation). */
  previousEncryptionKey: Buffer | undefined;
};

/**
 * 'stripe': the real Stripe API (STRIPE_SECRET_KEY). 'sandbox': the built-in
 * Stripe-compatible sandbox (development and tests only). 'disabled':
 * production without Stripe settings; the billing routes answer 503.
 */
export type BillingMode = 'stripe' | 'sandbox' | 'disabled';
export type BillingConfig = {
  mode: BillingMode;
  stripe: {
    secretKey: string;
    webhookSecret: string;
    /** Where the Stripe SDK sends requests (a local server in tests); undefined = api.stripe.com. */
    apiBase: string | undefined;
    prices: { pro: string; enterprise: string; agentAddon: string };
  };
  successUrl: string;
  cancelUrl: string;
  portalReturnUrl: string;
  purchase: {
    apiBase: string;
    apiKey: string | undefined;
    webhookSecret: string | undefined;
    /** Entitlement identifiers of the in-app purchase provider that grant each plan. */
    entitlements: { pro: string; enterprise: string };
  };
};

const schemas = { production: envSchema(SETTINGS, true), other: envSchema(SETTINGS, false) };

function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.join('.') || '(environment)'}: ${issue.message}`);
}

/** Every declared setting parsed, unset ones at their default for this NODE_ENV. */
function readEnv(env: NodeJS.ProcessEnv): Env {
  // Empty strings count as unset, as shells and .env files often leave them.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schemas[cleaned.NODE_ENV === 'production' ? 'production' : 'other'].safeParse(cleaned);
  if (!parsed.success) throw configError(describeIssues(parsed.error));
  return parsed.data as Env;
}

/**
 * Builds the configuration from an environment map (process.env by default).
 * Throws ConfigError naming every bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = readEnv(env);
  const dataDir = path.resolve(e.DATA_DIR);
  return assembleConfig(e, dataDir, resolveSecrets(e, dataDir));
}

/** For process entries: load the config or print the reason and exit 1. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
