// One validated configuration for every process (api, worker, ops scripts).
// Read once from the environment; a bad value stops the process with a message
// that names the variable. Secrets missing in development are generated once
// and kept under DATA_DIR; in production a missing secret is a startup error.
import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { externalLoginEnv, externalLoginSettings, type ExternalLoginSettings } from './external-login/settings.ts';
import { loginThrottleEnv, loginThrottleSettings, type LoginThrottleSettings } from './accounts/login-throttle.ts';
import { teamEnv, teamSettings, type TeamSettings } from './teams/settings.ts';
import { planLimitsEnv, planLimitSettings, type PlanLimitSettings } from './jobs/plan-limits.ts';

const boolFromEnv = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const intFromEnv = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const urlFromEnv = z
  .url({ protocol: /^https?$/ })
  .transform((v) => v.replace(/\/+$/, ''));

const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// connection string');

// Secrets: 32 random bytes, base64 or base64url. Checked for length so a typo
// such as a short password never becomes a signing key.
const secret32 = z
  .string()
  .transform((v, ctx) => {
    const buf = Buffer.from(v, 'base64');
    if (buf.length !== 32) {
      ctx.addIssue({ code: 'custom', message: 'must be 32 bytes encoded as base64 (openssl rand -base64 32)' });
      return z.NEVER;
    }
    return buf;
  });

/** Secrets the platform needs; each is generated in development when absent. */
export const SECRET_NAMES = ['PLATFORM_JWT_SECRET', 'DATA_ENCRYPTION_KEY'] as const;
type SecretName = (typeof SECRET_NAMES)[number];

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  DATABASE_URL: postgresUrl.optional(),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: intFromEnv(0, 65535).default(3000),
  BASE_URL: urlFromEnv.optional(),
  AUTH_URL: urlFromEnv.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().min(1).default('.data'),
  DB_POOL_MAX: intFromEnv(1, 200).default(10),
  EMBEDDED_PG_PORT: intFromEnv(0, 65535).default(0),
  TRUST_PROXY: boolFromEnv.default(false),
  SHUTDOWN_TIMEOUT_MS: intFromEnv(100, 600_000).default(10_000),
  WORKER_CONCURRENCY: intFromEnv(1, 100).default(8),
  WORKER_IO_CONCURRENCY: intFromEnv(1, 20_000).default(1_000),
  WORKER_FETCH_BATCH: intFromEnv(1, 1_000).default(64),
  WORKER_IO_FETCH_BATCH: intFromEnv(1, 1_000).default(1),
  WORKER_POLL_INTERVAL_MS: intFromEnv(50, 600_000).default(2_000),
  WORKER_HEARTBEAT_MS: intFromEnv(100, 600_000).default(5_000),
  WORKER_STALE_AFTER_MS: intFromEnv(500, 3_600_000).default(20_000),
  WORKER_SWEEP_INTERVAL_MS: intFromEnv(500, 3_600_000).default(15_000),
  JOB_CANCEL_GRACE_MS: intFromEnv(100, 600_000).default(5_000),
  WORKER_RUNNING_AFTER_MS: intFromEnv(0, 600_000).default(50),
  REQUEST_TIMEOUT_MS: intFromEnv(1_000, 3_600_000).default(30_000),
  CONNECTION_TIMEOUT_MS: intFromEnv(1_000, 3_600_000).default(120_000),
  KEEP_ALIVE_TIMEOUT_MS: intFromEnv(1_000, 3_600_000).default(72_000),
  MAX_REQUESTS_PER_SOCKET: intFromEnv(0, 1_000_000).default(1_000),
  JOB_RETENTION_DAYS: intFromEnv(1, 3650).default(30),
  // Above the 366 days usage may be back-dated: a day's rollup is recomputed
  // from its raw records, so a late record must never meet a swept day.
  USAGE_RECORD_RETENTION_DAYS: intFromEnv(368, 3650).default(400),
  EVENT_RETENTION_DAYS: intFromEnv(1, 3650).default(90),
  WS_HEARTBEAT_MS: intFromEnv(100, 600_000).default(30_000),
  WS_MAX_BUFFERED_BYTES: intFromEnv(1024, 64 * 1024 * 1024).default(1024 * 1024),
  WS_MAX_SUBSCRIPTIONS: intFromEnv(1, 10_000).default(100),
  WS_AUTH_TIMEOUT_MS: intFromEnv(100, 600_000).default(10_000),
  ANONYMOUS_REGISTRATION_DISABLED: boolFromEnv.default(false),
  SERVICE_AUTH_REGISTRATION_DISABLED: boolFromEnv.default(false),
  AGENT_ASSERTION_TTL_S: intFromEnv(300, 90 * 86_400).default(86_400),
  AGENT_ACCESS_TOKEN_TTL_S: intFromEnv(30, 3_600).default(300),
  AGENT_CLAIM_TOKEN_TTL_S: intFromEnv(300, 90 * 86_400).default(30 * 86_400),
  AGENT_AUTH_DISABLED: boolFromEnv.default(false),
  AGENT_API_RATE_LIMIT: intFromEnv(1, 1_000_000).default(600),
  AGENT_API_RATE_WINDOW_MS: intFromEnv(1_000, 3_600_000).default(60_000),
  AGENT_API_RATE_LEASE: intFromEnv(1, 100_000).optional(),
  AGENT_IDEMPOTENCY_LEASE_MS: intFromEnv(1_000, 3_600_000).default(15_000),
  PROVIDER_TIMEOUT_MS: intFromEnv(1_000, 600_000).default(60_000),
  PROVIDER_ALLOW_PRIVATE_URLS: boolFromEnv.default(false),
  OPENAI_BASE_URL: urlFromEnv.default('https://api.openai.com/v1'),
  ANTHROPIC_BASE_URL: urlFromEnv.default('https://api.anthropic.com'),
  OPENROUTER_BASE_URL: urlFromEnv.default('https://openrouter.ai/api/v1'),
  OLLAMA_BASE_URL: urlFromEnv.default('http://127.0.0.1:11434/v1'),
  PLATFORM_OPENAI_API_KEY: z.string().min(1).optional(),
  PLATFORM_ANTHROPIC_API_KEY: z.string().min(1).optional(),
  PLATFORM_OPENROUTER_API_KEY: z.string().min(1).optional(),
  NEW_TENANT_CREDITS_MICROS: intFromEnv(0, 1_000_000_000).default(5_000_000),
  CORS_ORIGINS: z
    .string()
    .transform((v) => v.split(',').map((o) => o.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol: /^https?$/ }).transform((o) => o.replace(/\/+$/, '')).refine((o) => new URL(o).origin === o, 'each origin is scheme://host[:port], no path')))
    .optional(),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  METRICS_PORT: intFromEnv(0, 65535).default(0),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  STRIPE_SECRET_KEY: z.string().regex(/^(sk|rk)_(test|live)_\S+$/, 'must be a Stripe secret or restricted key (sk_test_..., sk_live_...)').optional(),
  STRIPE_WEBHOOK_SECRET: z.string().regex(/^whsec_\S+$/, 'must be a webhook signing secret (whsec_...)').optional(),
  STRIPE_API_BASE: urlFromEnv.optional(),
  STRIPE_PRICE_PRO: z.string().min(1).optional(),
  STRIPE_PRICE_ENTERPRISE: z.string().min(1).optional(),
  STRIPE_PRICE_AGENT_ADDON: z.string().min(1).optional(),
  BILLING_SANDBOX: boolFromEnv.optional(),
  BILLING_SUCCESS_URL: urlFromEnv.optional(),
  BILLING_CANCEL_URL: urlFromEnv.optional(),
  BILLING_PORTAL_RETURN_URL: urlFromEnv.optional(),
  PURCHASE_API_BASE: urlFromEnv.default('https://api.revenuecat.com'),
  PURCHASE_API_KEY: z.string().min(1).optional(),
  PURCHASE_WEBHOOK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  PURCHASE_ENTITLEMENT_PRO: z.string().min(1).default('pro'),
  PURCHASE_ENTITLEMENT_ENTERPRISE: z.string().min(1).default('enterprise'),
  TELEGRAM_API_BASE: urlFromEnv.default('https://api.telegram.org'),
  SLACK_API_BASE: urlFromEnv.default('https://slack.com/api'),
  SLACK_AUTHORIZE_URL: urlFromEnv.default('https://slack.com/oauth/v2/authorize'),
  CHANNEL_LINK_TTL_S: intFromEnv(60, 86_400).default(900),
  SKILLS_DIR: z.string().min(1).optional(),
  ...externalLoginEnv,
  ...planLimitsEnv,
  ...loginThrottleEnv,
  ...teamEnv,
  DATA_ENCRYPTION_KEY_PREVIOUS: secret32.optional(),
  PLATFORM_JWT_SECRET: secret32.optional(),
  DATA_ENCRYPTION_KEY: secret32.optional(),
});

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

export class ConfigError extends Error {
  override name = 'ConfigError';
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `  ${issue.path.join('.') || '(environment)'}: ${issue.message}`)
    .join('\n');
}

/** Reads (or creates, mode 0600) the development secrets file. */
function developmentSecrets(dataDir: string): Record<SecretName, string> {
  const file = path.join(dataDir, 'secrets.json');
  let stored: Partial<Record<SecretName, string>> = {};
  if (existsSync(file)) {
    stored = JSON.parse(readFileSync(file, 'utf8')) as Partial<Record<SecretName, string>>;
  }
  let changed = false;
  for (const name of SECRET_NAMES) {
    if (!stored[name]) {
      stored[name] = randomBytes(32).toString('base64');
      changed = true;
    }
  }
  if (changed) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return stored as Record<SecretName, string>;
}

/**
 * Builds the configuration from an environment map (process.env by default).
 * Throws ConfigError naming every bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, as shells and .env files often leave them.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    throw new ConfigError(`Invalid configuration:\n${describeIssues(parsed.error)}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR);

  const missing = SECRET_NAMES.filter((name) => !e[name]);
  let secrets: Record<SecretName, Buffer>;
  if (missing.length > 0 && e.NODE_ENV === 'production') {
    throw new ConfigError(
      `Invalid configuration:\n${missing.map((n) => `  ${n}: required when NODE_ENV=production (openssl rand -base64 32)`).join('\n')}`,
    );
  }
  if (missing.length > 0) {
    const generated = developmentSecrets(dataDir);
    secrets = Object.fromEntries(
      SECRET_NAMES.map((name) => [name, e[name] ?? Buffer.from(generated[name], 'base64')]),
    ) as Record<SecretName, Buffer>;
  } else {
    secrets = Object.fromEntries(SECRET_NAMES.map((name) => [name, e[name] as Buffer])) as Record<SecretName, Buffer>;
  }

  const baseUrl = e.BASE_URL ?? `http://localhost:${e.PORT}`;
  const billing = billingConfig(e, baseUrl, secrets);
  return {
    nodeEnv: e.NODE_ENV,
    databaseUrl: e.DATABASE_URL,
    host: e.HOST,
    port: e.PORT,
    baseUrl,
    authUrl: e.AUTH_URL ?? baseUrl,
    logLevel: e.LOG_LEVEL,
    dataDir,
    dbPoolMax: e.DB_POOL_MAX,
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    trustProxy: e.TRUST_PROXY,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    worker: {
      concurrency: e.WORKER_CONCURRENCY,
      pollIntervalMs: e.WORKER_POLL_INTERVAL_MS,
      heartbeatMs: e.WORKER_HEARTBEAT_MS,
      staleAfterMs: e.WORKER_STALE_AFTER_MS,
      sweepIntervalMs: e.WORKER_SWEEP_INTERVAL_MS,
      ioConcurrency: e.WORKER_IO_CONCURRENCY,
      fetchBatch: e.WORKER_FETCH_BATCH,
      ioFetchBatch: e.WORKER_IO_FETCH_BATCH,
      cancelGraceMs: e.JOB_CANCEL_GRACE_MS,
      runningAfterMs: e.WORKER_RUNNING_AFTER_MS,
    },
    http: {
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      connectionTimeoutMs: e.CONNECTION_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
      maxRequestsPerSocket: e.MAX_REQUESTS_PER_SOCKET,
    },
    jobRetentionDays: e.JOB_RETENTION_DAYS,
    usageRecordRetentionDays: e.USAGE_RECORD_RETENTION_DAYS,
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    planLimits: planLimitSettings(e),
    loginThrottle: loginThrottleSettings(e),
    identity: {
      agentAuthDisabled: e.AGENT_AUTH_DISABLED,
      agentRateLimit: e.AGENT_API_RATE_LIMIT,
      agentRateWindowMs: e.AGENT_API_RATE_WINDOW_MS,
      agentRateLease: e.AGENT_API_RATE_LEASE ?? Math.max(1, Math.min(50, Math.ceil(e.AGENT_API_RATE_LIMIT / 20))),
      idempotencyLeaseMs: e.AGENT_IDEMPOTENCY_LEASE_MS,
      anonymousRegistrationDisabled: e.ANONYMOUS_REGISTRATION_DISABLED,
      serviceAuthRegistrationDisabled: e.SERVICE_AUTH_REGISTRATION_DISABLED,
      assertionTtlS: e.AGENT_ASSERTION_TTL_S,
      accessTokenTtlS: e.AGENT_ACCESS_TOKEN_TTL_S,
      claimTokenTtlS: e.AGENT_CLAIM_TOKEN_TTL_S,
    },
    ws: {
      heartbeatMs: e.WS_HEARTBEAT_MS,
      maxBufferedBytes: e.WS_MAX_BUFFERED_BYTES,
      maxSubscriptions: e.WS_MAX_SUBSCRIPTIONS,
      authTimeoutMs: e.WS_AUTH_TIMEOUT_MS,
    },
    providers: {
      timeoutMs: e.PROVIDER_TIMEOUT_MS,
      baseUrls: { openai: e.OPENAI_BASE_URL, anthropic: e.ANTHROPIC_BASE_URL, openrouter: e.OPENROUTER_BASE_URL, ollama: e.OLLAMA_BASE_URL },
      allowPrivateUrls: e.PROVIDER_ALLOW_PRIVATE_URLS,
      platformKeys: { openai: e.PLATFORM_OPENAI_API_KEY, anthropic: e.PLATFORM_ANTHROPIC_API_KEY, openrouter: e.PLATFORM_OPENROUTER_API_KEY },
      newTenantCreditsMicros: e.NEW_TENANT_CREDITS_MICROS,
    },
    billing,
    channels: {
      telegramApiBase: e.TELEGRAM_API_BASE,
      slackApiBase: e.SLACK_API_BASE,
      slackAuthorizeUrl: e.SLACK_AUTHORIZE_URL,
      linkTtlS: e.CHANNEL_LINK_TTL_S,
    },
    externalLogin: externalLoginSettings(e, baseUrl),
    teams: teamSettings(e, baseUrl),
    skillsDir: path.resolve(e.SKILLS_DIR ?? path.join(dataDir, 'skills')),
    corsOrigins: e.CORS_ORIGINS ?? [],
    metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_HOST },
    logFormat: e.LOG_FORMAT,
    secrets,
    previousEncryptionKey: e.DATA_ENCRYPTION_KEY_PREVIOUS,
  };
}

function billingConfig(e: z.infer<typeof envSchema>, baseUrl: string, secrets: Record<SecretName, Buffer>): BillingConfig {
  const sandboxAllowed = e.NODE_ENV !== 'production';
  if (e.BILLING_SANDBOX && !sandboxAllowed) {
    throw new ConfigError('Invalid configuration:\n  BILLING_SANDBOX: the billing sandbox is for development only; set STRIPE_SECRET_KEY in production');
  }
  const mode: BillingMode = e.STRIPE_SECRET_KEY && !e.BILLING_SANDBOX ? 'stripe' : sandboxAllowed && e.BILLING_SANDBOX !== false ? 'sandbox' : 'disabled';
  if (mode === 'stripe') {
    const missing = (['STRIPE_WEBHOOK_SECRET', 'STRIPE_PRICE_PRO', 'STRIPE_PRICE_ENTERPRISE', 'STRIPE_PRICE_AGENT_ADDON'] as const).filter((n) => !e[n]);
    if (missing.length > 0) {
      throw new ConfigError(`Invalid configuration:\n${missing.map((n) => `  ${n}: required with STRIPE_SECRET_KEY`).join('\n')}`);
    }
  }
  // The sandbox's webhook secret is derived from the platform secret: stable across restarts, never configured.
  const derived = createHmac('sha256', secrets.PLATFORM_JWT_SECRET).update('billing-sandbox-webhook').digest('base64url');
  return {
    mode,
    stripe: {
      secretKey: mode === 'stripe' ? e.STRIPE_SECRET_KEY! : 'sk_test_sandbox',
      // The sandbox signs its events with a configured secret too (else one derived from the platform secret).
      webhookSecret: e.STRIPE_WEBHOOK_SECRET ?? `whsec_${derived}`,
      apiBase: e.STRIPE_API_BASE,
      prices: {
        pro: e.STRIPE_PRICE_PRO ?? 'price_sandbox_pro',
        enterprise: e.STRIPE_PRICE_ENTERPRISE ?? 'price_sandbox_enterprise',
        agentAddon: e.STRIPE_PRICE_AGENT_ADDON ?? 'price_sandbox_agent_addon',
      },
    },
    successUrl: e.BILLING_SUCCESS_URL ?? `${baseUrl}/billing/return?checkout=success`,
    cancelUrl: e.BILLING_CANCEL_URL ?? `${baseUrl}/billing/return?checkout=cancelled`,
    portalReturnUrl: e.BILLING_PORTAL_RETURN_URL ?? `${baseUrl}/billing/return?portal=done`,
    purchase: {
      apiBase: e.PURCHASE_API_BASE,
      apiKey: e.PURCHASE_API_KEY,
      webhookSecret: e.PURCHASE_WEBHOOK_SECRET,
      entitlements: { pro: e.PURCHASE_ENTITLEMENT_PRO, enterprise: e.PURCHASE_ENTITLEMENT_ENTERPRISE },
    },
  };
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

