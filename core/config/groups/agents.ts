// The identity provider agents register with, and the Agent API's admission.
import { group, setting } from '../declare.ts';
import { boolFromEnv, intFromEnv } from '../parsers.ts';

export const agents = group(
  'Agents and the Agent API',
  'See [Agents: identity provider and Agent API](agents.md#agents-identity-provider-and-agent-api).',
  {
    AGENT_AUTH_DISABLED: setting(boolFromEnv, {
      default: false,
      doc: 'Switch agent authentication off: every `/api/agent/v1/*` call answers `503 temporarily_disabled`',
    }),
    AGENT_API_RATE_LIMIT: setting(intFromEnv(1, 1_000_000), {
      default: 600,
      doc: 'Shared admission limit of `/api/agent/v1/*` and `/mcp`: requests per window per principal (or IP without a valid token), across all api replicas',
    }),
    AGENT_API_RATE_WINDOW_MS: setting(intFromEnv(1_000, 3_600_000), {
      default: 60_000,
      doc: 'The window of that limit',
    }),
    AGENT_API_RATE_LEASE: setting(intFromEnv(1, 100_000), {
      shown: 'limit/20, between 1 and 50',
      doc: 'Tokens an api replica takes from the shared window at once (fewer database writes, bounded unfairness)',
    }),
    AGENT_IDEMPOTENCY_LEASE_MS: setting(intFromEnv(1_000, 3_600_000), {
      default: 15_000,
      doc: "Lease of a running request's `Idempotency-Key` claim; a claim left by a process that died is taken over after it",
    }),
    ANONYMOUS_REGISTRATION_DISABLED: setting(boolFromEnv, {
      default: false,
      doc: 'Refuse `anonymous` registrations (`anonymous_registration_disabled`)',
    }),
    SERVICE_AUTH_REGISTRATION_DISABLED: setting(boolFromEnv, {
      default: false,
      doc: 'Refuse `service_auth` registrations and claims (`service_auth_registration_disabled`, `auth_method_disabled`)',
    }),
    AGENT_ASSERTION_TTL_S: setting(intFromEnv(300, 90 * 86_400), {
      default: 86_400,
      doc: 'Lifetime of an identity assertion (refresh before it ends)',
    }),
    AGENT_ACCESS_TOKEN_TTL_S: setting(intFromEnv(30, 3_600), { default: 300, doc: 'Lifetime of an access token' }),
    AGENT_CLAIM_TOKEN_TTL_S: setting(intFromEnv(300, 90 * 86_400), {
      default: 30 * 86_400,
      doc: 'How long a registration can still be claimed',
    }),
  },
);
