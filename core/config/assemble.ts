// The Config consumers read, made from the parsed settings. The shape groups
// settings by who reads them; defaults that follow from other settings (the
// public URLs from BASE_URL, the rate lease from the limit) are worked out
// here, and their declarations say so in the docs.
import path from 'node:path';
import type { Config } from '../config.ts';
import type { ClientAuthSetting, ExternalLoginSettings } from '../external-login/settings.ts';
import type { TeamSettings } from '../teams/settings.ts';
import { billingConfig } from './billing.ts';
import type { SecretName } from './secrets.ts';
import type { Env } from './settings.ts';

function workerConfig(e: Env): Config['worker'] {
  return {
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
  };
}

function identityConfig(e: Env): Config['identity'] {
  return {
    agentAuthDisabled: e.AGENT_AUTH_DISABLED,
    agentRateLimit: e.AGENT_API_RATE_LIMIT,
    agentRateWindowMs: e.AGENT_API_RATE_WINDOW_MS,
    // A twentieth of the limit (1 to 50): few database writes, and what a replica holds unused stays a small share of the window.
    agentRateLease: e.AGENT_API_RATE_LEASE ?? Math.max(1, Math.min(50, Math.ceil(e.AGENT_API_RATE_LIMIT / 20))),
    idempotencyLeaseMs: e.AGENT_IDEMPOTENCY_LEASE_MS,
    anonymousRegistrationDisabled: e.ANONYMOUS_REGISTRATION_DISABLED,
    serviceAuthRegistrationDisabled: e.SERVICE_AUTH_REGISTRATION_DISABLED,
    assertionTtlS: e.AGENT_ASSERTION_TTL_S,
    accessTokenTtlS: e.AGENT_ACCESS_TOKEN_TTL_S,
    claimTokenTtlS: e.AGENT_CLAIM_TOKEN_TTL_S,
  };
}

function providersConfig(e: Env): Config['providers'] {
  return {
    timeoutMs: e.PROVIDER_TIMEOUT_MS,
    baseUrls: {
      openai: e.OPENAI_BASE_URL,
      anthropic: e.ANTHROPIC_BASE_URL,
      openrouter: e.OPENROUTER_BASE_URL,
      ollama: e.OLLAMA_BASE_URL,
    },
    allowPrivateUrls: e.PROVIDER_ALLOW_PRIVATE_URLS,
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
export function assembleConfig(e: Env, dataDir: string, secrets: Record<SecretName, Buffer>): Config {
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
    worker: workerConfig(e),
    http: {
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      connectionTimeoutMs: e.CONNECTION_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_MS,
      maxRequestsPerSocket: e.MAX_REQUESTS_PER_SOCKET,
    },
    jobRetentionDays: e.JOB_RETENTION_DAYS,
    usageRecordRetentionDays: e.USAGE_RECORD_RETENTION_DAYS,
    eventRetentionDays: e.EVENT_RETENTION_DAYS,
    planLimits: {
      fairWeight: e.PLAN_FAIR_WEIGHTS ?? {},
      maxWorkspaces: e.PLAN_MAX_WORKSPACES ?? {},
      maxOpenJobs: e.PLAN_MAX_OPEN_JOBS ?? {},
    },
    loginThrottle: {
      perAccount: e.LOGIN_FAILURES_PER_ACCOUNT,
      perAddress: e.LOGIN_FAILURES_PER_ADDRESS,
      windowMs: e.LOGIN_LOCKOUT_MINUTES * 60_000,
    },
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
      telegramApiBase: e.TELEGRAM_API_BASE,
      slackApiBase: e.SLACK_API_BASE,
      slackAuthorizeUrl: e.SLACK_AUTHORIZE_URL,
      linkTtlS: e.CHANNEL_LINK_TTL_S,
    },
    externalLogin: externalLoginConfig(e, baseUrl),
    teams: teamsConfig(e, baseUrl),
    skillsDir: path.resolve(e.SKILLS_DIR ?? path.join(dataDir, 'skills')),
    corsOrigins: e.CORS_ORIGINS ?? [],
    metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_HOST },
    logFormat: e.LOG_FORMAT,
    secrets,
    previousEncryptionKey: e.DATA_ENCRYPTION_KEY_PREVIOUS,
  };
}
