// The Config consumers read, made from the parsed settings. The shape groups
// settings by who reads them; defaults that follow from other settings (the
// public URLs from BASE_URL, the rate lease from the limit) are worked out
// here, and their declarations say so in the docs. The Config type is what
// assembleConfig returns (core/config.ts), so the comments on these properties
// are what editors show for config.<field>.
import path from 'node:path';
import type { LoginThrottleSettings } from '../accounts/login-throttle.ts';
import type { ClientAuthSetting, ExternalLoginSettings } from '../external-login/settings.ts';
import type { PlanLimitSettings } from '../jobs/plan-limits.ts';
import type { TeamSettings } from '../teams/settings.ts';
import { billingConfig } from './billing.ts';
import type { SecretName } from './secrets.ts';
import type { Env } from './settings.ts';

function workerConfig(e: Env) {
  return {
    concurrency: e.WORKER_CONCURRENCY,
    pollIntervalMs: e.WORKER_POLL_INTERVAL_MS,
    heartbeatMs: e.WORKER_HEARTBEAT_MS,
    staleAfterMs: e.WORKER_STALE_AFTER_MS,
    sweepIntervalMs: e.WORKER_SWEEP_INTERVAL_MS,
    /** Slots of the I/O pool: jobs that wait on a model or a channel (core/jobs/pools.ts). */
    ioConcurrency: e.WORKER_IO_CONCURRENCY,
    /** Jobs the short pool fetches at once (at least its concurrency). */
    fetchBatch: e.WORKER_FETCH_BATCH,
    /** Jobs the I/O pool fetches at once: small, since a full process holds them until a slot frees. */
    ioFetchBatch: e.WORKER_IO_FETCH_BATCH,
    /** How long a running job may take to stop after it is cancelled before it is cut off. */
    cancelGraceMs: e.JOB_CANCEL_GRACE_MS,
    /** A job still at work after this long is marked 'running' (quicker ones go from queued to their result). */
    runningAfterMs: e.WORKER_RUNNING_AFTER_MS,
  };
}

function identityConfig(e: Env) {
  return {
    /** Switches agent authentication off: the Agent API answers 503 temporarily_disabled. */
    agentAuthDisabled: e.AGENT_AUTH_DISABLED,
    /** Shared admission limit of /api/agent/v1: requests per window per principal. */
    agentRateLimit: e.AGENT_API_RATE_LIMIT,
    agentRateWindowMs: e.AGENT_API_RATE_WINDOW_MS,
    // A twentieth of the limit (1 to 50): few database writes, and what a replica holds unused stays a small share of the window.
    /** Tokens an api replica takes from the shared window at once (fewer database writes, bounded unfairness). */
    agentRateLease: e.AGENT_API_RATE_LEASE ?? Math.max(1, Math.min(50, Math.ceil(e.AGENT_API_RATE_LIMIT / 20))),
    /** An in-progress Idempotency-Key claim whose owner stopped renewing it for this long may be taken over. */
    idempotencyLeaseMs: e.AGENT_IDEMPOTENCY_LEASE_MS,
    anonymousRegistrationDisabled: e.ANONYMOUS_REGISTRATION_DISABLED,
    serviceAuthRegistrationDisabled: e.SERVICE_AUTH_REGISTRATION_DISABLED,
    assertionTtlS: e.AGENT_ASSERTION_TTL_S,
    accessTokenTtlS: e.AGENT_ACCESS_TOKEN_TTL_S,
    claimTokenTtlS: e.AGENT_CLAIM_TOKEN_TTL_S,
  };
}

function providersConfig(e: Env) {
  return {
    timeoutMs: e.PROVIDER_TIMEOUT_MS,
    baseUrls: {
      openai: e.OPENAI_BASE_URL,
      anthropic: e.ANTHROPIC_BASE_URL,
      openrouter: e.OPENROUTER_BASE_URL,
      ollama: e.OLLAMA_BASE_URL,
    },
    /** A tenant's own provider baseUrl may lead to private/loopback addresses (the operator's baseUrls always may). */
    allowPrivateUrls: e.PROVIDER_ALLOW_PRIVATE_URLS,
    /** The platform's own keys, used for tenants on platform credits. */
    platformKeys: {
      openai: e.PLATFORM_OPENAI_API_KEY,
      anthropic: e.PLATFORM_ANTHROPIC_API_KEY,
      openrouter: e.PLATFORM_OPENROUTER_API_KEY,
    },
    newTenantCreditsMicros: e.NEW_TENANT_CREDITS_MICROS,
  };
}

/** A private key wins when both are given: private_key_jwt never sends a shared secret. */
function clientAuth(
  secret: string | undefined,
  jwk: Record<string, unknown> | undefined,
): ClientAuthSetting | undefined {
  if (jwk) return { kind: 'private_key', jwk };
  if (secret) return { kind: 'secret', secret };
  return undefined;
}

function externalLoginConfig(e: Env, baseUrl: string): ExternalLoginSettings {
  return {
    partner: {
      issuer: e.PARTNER_ISSUER,
      clientId: e.PARTNER_CLIENT_ID,
      clientAuth: clientAuth(e.PARTNER_CLIENT_SECRET, e.PARTNER_CLIENT_PRIVATE_KEY),
      iosClientId: e.PARTNER_IOS_CLIENT_ID,
      redirectUris: e.PARTNER_REDIRECT_URIS ?? [],
      connectRedirectUri: e.PARTNER_CONNECT_REDIRECT_URI ?? `${baseUrl}/oauth/partner/callback`,
    },
    altidp: {
      issuer: e.ALTIDP_ISSUER,
      clientId: e.ALTIDP_CLIENT_ID,
      clientAuth: clientAuth(e.ALTIDP_CLIENT_SECRET, e.ALTIDP_CLIENT_PRIVATE_KEY),
      appClientIds: e.ALTIDP_APP_CLIENT_IDS ?? [],
      scopes: e.ALTIDP_SCOPES,
      redirectUri: e.ALTIDP_REDIRECT_URI ?? `${baseUrl}/api/auth/altidp/callback`,
    },
  };
}

function planLimitsConfig(e: Env): PlanLimitSettings {
  return {
    fairWeight: e.PLAN_FAIR_WEIGHTS ?? {},
    maxWorkspaces: e.PLAN_MAX_WORKSPACES ?? {},
    maxOpenJobs: e.PLAN_MAX_OPEN_JOBS ?? {},
  };
}

function loginThrottleConfig(e: Env): LoginThrottleSettings {
  return {
    perAccount: e.LOGIN_FAILURES_PER_ACCOUNT,
    perAddress: e.LOGIN_FAILURES_PER_ADDRESS,
    windowMs: e.LOGIN_LOCKOUT_MINUTES * 60_000,
  };
}

function teamsConfig(e: Env, baseUrl: string): TeamSettings {
  return {
    invitationTtlHours: e.INVITATION_TTL_HOURS,
    invitationsPerDay: e.INVITATIONS_PER_DAY,
    pendingInvitations: e.INVITATIONS_PENDING_MAX,
    smtpUrl: e.SMTP_URL ?? null,
    mailFrom: e.MAIL_FROM ?? `Agent platform <no-reply@${new URL(baseUrl).hostname}>`,
  };
}

/** The whole Config; `dataDir` is DATA_DIR made absolute, `secrets` those resolveSecrets settled. */
export function assembleConfig(e: Env, dataDir: string, secrets: Record<SecretName, Buffer>) {
  const baseUrl = e.BASE_URL ?? `http://localhost:${e.PORT}`;
  const billing = billingConfig(e, baseUrl, secrets);
  return {
    nodeEnv: e.NODE_ENV,
    databaseUrl: e.DATABASE_URL,
    host: e.HOST,
    port: e.PORT,
    baseUrl,
    authUrl: e.AUTH_URL ?? baseUrl,
    /** A pino level name; typed as any string so a copy may name another level. */
    logLevel: e.LOG_LEVEL as string,
    dataDir,
    dbPoolMax: e.DB_POOL_MAX,
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    trustProxy: e.TRUST_PROXY,
    shutdownTimeoutMs: e.SHUTDOWN_TIMEOUT_MS,
    worker: workerConfig(e),
    http: {
      /** Whole request (headers and body) must arrive within this time. */
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      /** An idle socket is closed after this time. */
      connectionTimeoutMs: e.CONNECTION_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
      /** 0 = unlimited. */
      maxRequestsPerSocket: e.MAX_REQUESTS_PER_SOCKET,
    },
    jobRetentionDays: e.JOB_RETENTION_DAYS,
    /** Raw usage records (each day's totals stay in usage_daily). */
    usageRecordRetentionDays: e.USAGE_RECORD_RETENTION_DAYS,
    /** Processed inbound events: Stripe and purchase webhooks, channel updates and sent replies. */
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    /** Fair-order weights and quotas per plan to write at start (only those configured). */
    planLimits: planLimitsConfig(e),
    /** The login budget: failures per account and per address (core/accounts/login-throttle.ts). */
    loginThrottle: loginThrottleConfig(e),
    identity: identityConfig(e),
    ws: {
      heartbeatMs: e.WS_HEARTBEAT_MS,
      maxBufferedBytes: e.WS_MAX_BUFFERED_BYTES,
      maxSubscriptions: e.WS_MAX_SUBSCRIPTIONS,
      authTimeoutMs: e.WS_AUTH_TIMEOUT_MS,
    },
    providers: providersConfig(e),
    billing,
    channels: {
      /** Telegram Bot API origin (https://api.telegram.org); tests and self-hosted Bot API servers point elsewhere. */
      telegramApiBase: e.TELEGRAM_API_BASE,
      /** Slack Web API base (https://slack.com/api). */
      slackApiBase: e.SLACK_API_BASE,
      /** Slack's OAuth v2 install page (https://slack.com/oauth/v2/authorize). */
      slackAuthorizeUrl: e.SLACK_AUTHORIZE_URL,
      /** How long a started link (deep link, install URL, session token) stays usable. */
      linkTtlS: e.CHANNEL_LINK_TTL_S,
    },
    /** The external OpenID Connect providers people log in with (partner, altidp). */
    externalLogin: externalLoginConfig(e, baseUrl),
    /** Invitations' bounds and the SMTP server that mails them (core/teams/settings.ts). */
    teams: teamsConfig(e, baseUrl),
    /** The directory POST /api/skills/sync reads (default DATA_DIR/skills). */
    skillsDir: path.resolve(e.SKILLS_DIR ?? path.join(dataDir, 'skills')),
    /** Browser origins allowed to call the API (CORS); empty = CORS off. */
    corsOrigins: e.CORS_ORIGINS ?? [],
    metrics: {
      /** GET /metrics on the api's port, for a Bearer token equal to this; undefined = not on the public port. */
      token: e.METRICS_TOKEN,
      /** A separate listener for /metrics (every process: api, worker, all-in-one); 0 = none. */
      port: e.METRICS_PORT,
      host: e.METRICS_HOST,
    },
    /** auto: readable lines when stdout is a terminal in development, JSON otherwise. */
    logFormat: e.LOG_FORMAT,
    secrets,
    /** A retired data key that still decrypts what it sealed (rotation). */
    previousEncryptionKey: e.DATA_ENCRYPTION_KEY_PREVIOUS,
  };
}
