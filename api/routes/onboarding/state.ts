// Onboarding without HTTP: the first workspace of a person (tenant, default
// agent on the built-in offline model, new-tenant credits), the provider
// step and completion. The state lives in tenants.settings.onboarding, so it
// travels with the tenant and needs no table of its own.
import { z } from 'zod';
import type { Config } from '../../../core/config.ts';
import type { Keyring } from '../../../core/crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../../../core/db/pool.ts';
import { grantInitialCredits, putKey, type MaskedKey } from '../../../core/provider-keys/keys.ts';
import { modelRef } from '../../../core/providers/registry.ts';
import type { KeyedProvider } from '../../../core/providers/types.ts';
import { createTenant } from '../../../core/tenants/tenants.ts';
import { defaultAgent } from '../../../core/chat/sessions.ts';

export const DEFAULT_AGENT = { name: 'Assistant', model: modelRef('builtin', 'offline') };
export const DEFAULT_WORKSPACE_NAME = 'My workspace';

export const OnboardingState = z.object({
  state: z.enum(['started', 'completed']),
  steps: z.object({
    workspace: z.boolean().describe('Tenant, default agent and starting credits exist'),
    providerKey: z
      .boolean()
      .describe('A provider key was validated and saved (optional: the offline model needs none)'),
    model: z.boolean().describe('A model was chosen for the default agent'),
  }),
  startedAt: z.iso.datetime(),
  completedAt: z.iso.datetime().nullable(),
});
export type OnboardingState = z.infer<typeof OnboardingState>;

const Settings = z.record(z.string(), z.unknown());
const readState = (settings: Record<string, unknown>): OnboardingState | null => {
  const parsed = OnboardingState.safeParse(settings.onboarding);
  return parsed.success ? parsed.data : null;
};

async function writeSettings(tx: CommonQueryMethods, tenantId: string, patch: Record<string, unknown>) {
  await tx.query(
    sql.unsafe`update tenants set settings = settings || ${sql.jsonb(patch as never)} where id = ${tenantId}`,
  );
}

export type InitResult = { created: boolean; tenantId: string; agentId: string; onboarding: OnboardingState };

const TenantPick = z.object({ id: z.string(), settings: Settings });

/**
 * Idempotent per user: a tenant where the user is Admin that already has an
 * onboarding state is returned as it is. Otherwise the user's oldest tenant
 * where they are Admin is set up (someone who created a tenant by hand),
 * or, with none, a new tenant is created: being a Viewer somewhere is not
 * having a workspace of one's own. One transaction under a per-user
 * lock, so two concurrent calls make one workspace.
 */
export async function initOnboarding(db: DatabasePool, config: Config, userId: string): Promise<InitResult> {
  return db.transaction(async (tx) => {
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('onboarding-init:' || ${userId}))`);
    const onboarded = await tx.maybeOne(sql.type(TenantPick)`
      select t.id, t.settings from tenants t
      join tenant_memberships m on m.tenant_id = t.id and m.user_id = ${userId} and m.role = 'admin'
      where t.settings ? 'onboarding' order by t.created_at, t.id limit 1`);
    const state = onboarded && readState(onboarded.settings);
    if (onboarded && state) {
      return {
        created: false,
        tenantId: onboarded.id,
        agentId: (await defaultAgent(tx, onboarded.id)).id,
        onboarding: state,
      };
    }

    const owned = await tx.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
      select t.id from tenants t join tenant_memberships m on m.tenant_id = t.id and m.user_id = ${userId} and m.role = 'admin'
      order by t.created_at, t.id limit 1`);
    // createTenant nests as a savepoint of this transaction.
    const tenantId =
      owned ?? (await createTenant(tx, userId, DEFAULT_WORKSPACE_NAME, config.providers.newTenantCreditsMicros)).id;
    const agentId = (await defaultAgent(tx, tenantId)).id;
    const agentModel = await tx.oneFirst(
      sql.type(z.object({ model: z.string() }))`select model from agents where id = ${agentId}`,
    );
    // Once per tenant: a tenant that ever had a credits row gets no second grant.
    await grantInitialCredits(tx, tenantId, config.providers.newTenantCreditsMicros);
    const onboarding: OnboardingState = {
      state: 'started',
      steps: { workspace: true, providerKey: false, model: false },
      startedAt: new Date().toISOString(),
      completedAt: null,
    };
    await writeSettings(tx, tenantId, { onboarding, defaultModel: agentModel });
    return { created: true, tenantId, agentId, onboarding };
  });
}

export type SetupInput = {
  tenantId: string;
  userId: string;
  provider: KeyedProvider;
  apiKey: string;
  baseUrl?: string;
  /** A full model reference ('openai/gpt-4o-mini'), already checked against the provider's models. */
  model?: string;
};

/** Saves the (already validated) key and, with a model, points the default agent at it; one transaction. */
export async function applySetup(db: DatabasePool, keyring: Keyring, input: SetupInput) {
  return db.transaction(async (tx) => {
    const saved: MaskedKey = await putKey(tx, keyring, input);
    const settings = await tx.oneFirst(sql.type(z.object({ settings: Settings }))`
      select settings from tenants where id = ${input.tenantId} for update`);
    let agentModel: string | null = null;
    if (input.model) {
      const agentId = (await defaultAgent(tx, input.tenantId)).id;
      await tx.query(sql.unsafe`update agents set model = ${input.model} where id = ${agentId}`);
      agentModel = input.model;
    }
    const state = readState(settings);
    const onboarding = state && {
      ...state,
      steps: { ...state.steps, providerKey: true, model: state.steps.model || agentModel !== null },
    };
    await writeSettings(tx, input.tenantId, {
      ...(onboarding ? { onboarding } : {}),
      ...(agentModel ? { defaultModel: agentModel } : {}),
    });
    return { saved, model: agentModel, onboarding };
  });
}

export type CompleteResult =
  | { kind: 'not_found' }
  | { kind: 'not_started' }
  | { kind: 'completed'; onboarding: OnboardingState };

/**
 * Marks onboarding complete for a tenant one of whose Admins has the
 * license's purchaser e-mail; any other tenant reads as missing. Completing
 * twice keeps the first completion time.
 */
export async function completeOnboarding(
  db: DatabasePool,
  tenantId: string,
  purchaserEmail: string,
): Promise<CompleteResult> {
  return db.transaction(async (tx) => {
    const settings = await tx.maybeOneFirst(sql.type(z.object({ settings: Settings }))`
      select t.settings from tenants t
      where t.id = ${tenantId} and exists (
        select 1 from tenant_memberships m join users u on u.id = m.user_id
        where m.tenant_id = t.id and m.role = 'admin' and u.email_key = canonical_email(${purchaserEmail}))
      for update of t`);
    if (!settings) return { kind: 'not_found' };
    const state = readState(settings);
    if (!state) return { kind: 'not_started' };
    const onboarding: OnboardingState = {
      ...state,
      state: 'completed',
      completedAt: state.completedAt ?? new Date().toISOString(),
    };
    await writeSettings(tx, tenantId, { onboarding });
    return { kind: 'completed', onboarding };
  });
}
