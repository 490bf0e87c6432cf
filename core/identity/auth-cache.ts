// What the Agent API checks on every request, kept in process memory so a
// warm request costs no database round trip:
// - verified access tokens (until they expire), so the ES256 signature is
//   checked once per token rather than once per request;
// - per registration: live, linked, claim state, workspace and plan.
// Every replica hears agent_auth_events (NOTIFY from triggers on
// registrations, principals and tenants) and forgets what changed, so a
// revocation takes effect everywhere within milliseconds. While that LISTEN
// connection is down nothing is cached.
import type { AgentContextRow } from '../agent/capabilities.ts';
import type { JobEventHub } from '../jobs/events.ts';
import type { AccessClaims } from './tokens.ts';

export type RegistrationSnapshot = AgentContextRow;

const MAX_TOKENS = 10_000;
const MAX_REGISTRATIONS = 10_000;
const REGISTRATION_TTL_MS = 30_000;

export class AgentAuthCache {
  private tokens = new Map<string, AccessClaims>();
  private registrations = new Map<string, { snapshot: RegistrationSnapshot; at: number }>();
  private enabled = false;
  // Counts invalidations, so a snapshot read while one arrived is not kept.
  private invalidations = 0;

  constructor(hub: JobEventHub) {
    hub.onConnectionChange((connected) => {
      // On reconnect the hub has already re-issued LISTEN for our channel.
      this.enabled = connected;
      this.clear();
    });
    // Cache nothing until invalidations can reach us.
    void hub
      .listen('agent_auth_events', (registrationId) => {
        this.invalidations += 1;
        this.registrations.delete(registrationId);
      })
      .then(() => {
        this.enabled = hub.connected;
      });
  }

  token(token: string): AccessClaims | undefined {
    const claims = this.tokens.get(token);
    if (claims && claims.expiresAt * 1000 <= Date.now()) {
      this.tokens.delete(token);
      return undefined;
    }
    return claims;
  }

  rememberToken(token: string, claims: AccessClaims): void {
    if (!this.enabled) return;
    if (this.tokens.size >= MAX_TOKENS) this.tokens.delete(this.tokens.keys().next().value!);
    this.tokens.set(token, claims);
  }

  registration(id: string): RegistrationSnapshot | undefined {
    if (!this.enabled) return undefined;
    const entry = this.registrations.get(id);
    if (!entry || Date.now() - entry.at > REGISTRATION_TTL_MS) return undefined;
    return entry.snapshot;
  }

  /** Taken before reading a snapshot; pass it to rememberRegistration. */
  readStarted(): number {
    return this.invalidations;
  }

  /** Keeps the snapshot unless an invalidation arrived since its read started (it may predate the change). */
  rememberRegistration(id: string, snapshot: RegistrationSnapshot, readStarted: number): void {
    if (!this.enabled || readStarted !== this.invalidations) return;
    if (this.registrations.size >= MAX_REGISTRATIONS)
      this.registrations.delete(this.registrations.keys().next().value!);
    this.registrations.set(id, { snapshot, at: Date.now() });
  }

  clear(): void {
    this.invalidations += 1;
    this.tokens.clear();
    this.registrations.clear();
  }
}
