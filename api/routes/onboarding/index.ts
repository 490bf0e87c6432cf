// Onboarding: a first workspace that can chat at once (the built-in offline
// model on new-tenant credits), the models on offer, a provider key checked
// with the provider before it is saved, and completion from the dashboard.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import { modelRef, PROVIDERS, providerFor } from '../../../core/providers/registry.ts';
import { KEYED_PROVIDERS, ProviderError, type KeyedProvider, type ProviderId } from '../../../core/providers/types.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import dashboardAuth from '../../plugins/dashboard-auth.ts';
import { TenantHeaders } from '../../plugins/tenant.ts';
import { assertTenantBaseUrl, BASE_URL_RULES } from '../provider-keys/base-url.ts';
import { ApiKey, BaseUrl, KeyedProviderId, SavedProviderKey } from '../provider-keys/schemas.ts';
import { TenantLimitError } from '../../../core/tenants/tenants.ts';
import { applySetup, completeOnboarding, DEFAULT_AGENT, initOnboarding, OnboardingState } from './state.ts';

const tags = ['onboarding'];
const Onboarding = OnboardingState.meta({ id: 'OnboardingState' });
const InitResult = z
  .object({ tenantId: z.uuid(), agentId: z.uuid(), onboarding: Onboarding })
  .meta({ id: 'OnboardingInit' });

const OnboardingModel = z.object({
  id: z.string().describe('Model reference to use elsewhere, e.g. openai/gpt-4o-mini'),
  model: z.string().describe("The provider's own model name"),
  name: z.string(),
  contextWindow: z.int().optional(),
  inputPricePerMTokMicros: z.int(),
  outputPricePerMTokMicros: z.int(),
  offline: z.boolean().describe('Runs inside the platform without calling any provider'),
  needsKey: z.boolean(),
});
const OnboardingProvider = z.object({
  id: z.string(),
  displayName: z.string(),
  needsKey: z.boolean(),
  acceptsOwnKey: z
    .boolean()
    .describe('A tenant may store its own key (PUT /api/provider-keys/:provider, POST /api/onboarding/setup)'),
  platformCredits: z.boolean().describe('Usable on platform credits without an own key'),
  models: z.array(OnboardingModel),
});

const isKeyed = (id: ProviderId): id is KeyedProvider => (KEYED_PROVIDERS as readonly string[]).includes(id);

/** The full reference of one of `provider`'s listed models, given bare or prefixed; null otherwise. */
function listedModel(provider: KeyedProvider, model: string): string | null {
  const listed = PROVIDERS.find((p) => p.id === provider)?.models ?? [];
  const prefix = `${provider}/`;
  const candidates = model.startsWith(prefix) ? [model.slice(prefix.length), model] : [model];
  const hit = candidates.find((name) => listed.some((m) => m.id === name));
  return hit ? modelRef(provider, hit) : null;
}

const onboardingRoutes: FastifyPluginAsyncZod = async (app) => {
  // Registered here because api/app.ts does not; skipped if it already is.
  if (!app.hasDecorator('requireDashboard')) await app.register(dashboardAuth);
  const keyring = Keyring.fromConfig(app.config);

  app.post(
    '/api/onboarding/init',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'initOnboarding',
        tags,
        summary:
          'Create the first workspace with default settings, a default agent and starting credits; returns the onboarding state',
        description:
          'Idempotent: when a tenant where the caller is Admin already has an onboarding state it is returned (200) and nothing is created. ' +
          "Otherwise the caller's oldest tenant where they are Admin is set up, or a new tenant is created (201). " +
          `The default agent "${DEFAULT_AGENT.name}" runs on ${DEFAULT_AGENT.model}, which needs no key.`,
        security: [{ PlatformJWT: [] }],
        response: { 200: InitResult, 201: InitResult, 401: PlatformError, 409: PlatformError },
      },
    },
    async (request, reply) => {
      const result = await initOnboarding(app.db, app.config, request.user!.userId).catch((error: unknown) => {
        if (error instanceof TenantLimitError) throw new PlatformHttpError(409, 'tenant_limit_reached', error.message);
        throw error;
      });
      if (result.created)
        request.log.info({ tenantId: result.tenantId, userId: request.user!.userId }, 'onboarding started');
      return reply
        .code(result.created ? 201 : 200)
        .send({ tenantId: result.tenantId, agentId: result.agentId, onboarding: result.onboarding });
    },
  );

  app.get(
    '/api/onboarding/models',
    {
      schema: {
        operationId: 'listOnboardingModels',
        security: [],
        tags,
        summary: 'Model providers and their models with prices',
        response: {
          200: z
            .object({
              defaultModel: z.string().describe('What a new workspace uses: offline, no key needed'),
              providers: z.array(OnboardingProvider),
            })
            .meta({ id: 'OnboardingModels' }),
        },
      },
    },
    async () => ({
      defaultModel: DEFAULT_AGENT.model,
      providers: PROVIDERS.map((p) => {
        const offline = p.id === 'builtin';
        const platformKey = isKeyed(p.id) && p.id !== 'ollama' && Boolean(app.config.providers.platformKeys[p.id]);
        return {
          id: p.id,
          displayName: p.displayName,
          needsKey: p.needsKey,
          acceptsOwnKey: isKeyed(p.id),
          platformCredits: !p.needsKey || platformKey,
          models: p.models.map((m) => ({
            id: modelRef(p.id, m.id),
            model: m.id,
            name: m.name,
            ...(m.contextWindow === undefined ? {} : { contextWindow: m.contextWindow }),
            inputPricePerMTokMicros: m.inputPricePerMTokMicros,
            outputPricePerMTokMicros: m.outputPricePerMTokMicros,
            offline,
            needsKey: p.needsKey,
          })),
        };
      }),
    }),
  );

  app.post(
    '/api/onboarding/setup',
    {
      onRequest: app.requireUser,
      preValidation: app.requireTenant('admin'),
      schema: {
        operationId: 'setupOnboardingProvider',
        tags,
        summary: "Check a provider key with the provider, then save it and optionally choose the default agent's model",
        description:
          'Nothing is stored unless the provider accepts the key: 400 invalid_provider_key when it refuses it, ' +
          "502 provider_unreachable when it cannot be asked. `model` must be one of the provider's models from " +
          'GET /api/onboarding/models (e.g. openai/gpt-4o-mini or gpt-4o-mini); 400 unknown_model otherwise. ' +
          BASE_URL_RULES,
        security: [{ PlatformJWT: [] }],
        headers: TenantHeaders,
        body: z.object({
          provider: KeyedProviderId,
          apiKey: ApiKey,
          baseUrl: BaseUrl.optional(),
          model: z.string().min(1).max(200).optional(),
        }),
        response: {
          200: SavedProviderKey.extend({
            model: z.string().nullable().describe("The default agent's model when it was set"),
            onboarding: Onboarding.nullable(),
          }).meta({
            id: 'OnboardingSetup',
          }),
          400: PlatformError,
          401: PlatformError,
          403: PlatformError,
          404: PlatformError,
          502: PlatformError,
        },
      },
    },
    async (request) => {
      const { provider, apiKey, baseUrl } = request.body;
      const model = request.body.model === undefined ? undefined : listedModel(provider, request.body.model);
      if (model === null)
        throw new PlatformHttpError(
          400,
          'unknown_model',
          `Not a model of ${provider}; see GET /api/onboarding/models.`,
        );
      // Before the key check, which would call the URL.
      await assertTenantBaseUrl(app.config, baseUrl);

      // A bounded synchronous call to the provider (the adapter's timeout):
      // the answer must say whether the key works, before anything is saved.
      const adapter = providerFor(provider, app.config.providers);
      let verdict: Awaited<ReturnType<typeof adapter.validateKey>>;
      try {
        verdict = await adapter.validateKey({ apiKey, ...(baseUrl ? { baseUrl } : {}) });
      } catch (error) {
        if (error instanceof ProviderError && error.kind === 'invalid_key')
          verdict = { valid: false, reason: 'refused' };
        else {
          // Kind and status only: provider messages may echo request details.
          request.log.warn(
            {
              provider,
              kind: error instanceof ProviderError ? error.kind : 'network',
              status: (error as ProviderError).status,
            },
            'provider key check failed',
          );
          throw new PlatformHttpError(
            502,
            'provider_unreachable',
            `${adapter.displayName} could not be reached to check the key; nothing was saved. Try again.`,
          );
        }
      }
      if (!verdict.valid) {
        throw new PlatformHttpError(
          400,
          'invalid_provider_key',
          `${adapter.displayName} refused this key; nothing was saved.`,
        );
      }

      const result = await applySetup(app.db, keyring, {
        tenantId: request.tenant!.id,
        userId: request.user!.userId,
        provider,
        apiKey,
        ...(baseUrl ? { baseUrl } : {}),
        ...(model ? { model } : {}),
      });
      request.log.info(
        { tenantId: request.tenant!.id, provider, userId: request.user!.userId, model: result.model },
        'provider key saved by onboarding',
      );
      const { saved } = result;
      return {
        provider: saved.provider,
        masked: saved.masked,
        last4: saved.last4,
        baseUrl: saved.baseUrl,
        updatedAt: saved.updatedAt,
        model: result.model,
        onboarding: result.onboarding,
      };
    },
  );

  app.post(
    '/api/onboarding/complete',
    {
      onRequest: app.requireDashboard,
      schema: {
        operationId: 'completeOnboarding',
        tags,
        summary: 'Mark onboarding complete (Dashboard Auth)',
        description:
          'A dashboard token identifies a license, not a tenant, so the tenant is named in the body and must have an Admin ' +
          "whose e-mail is the license's purchaser e-mail; any other tenant is 404, like one that does not exist. " +
          '409 onboarding_not_started before POST /api/onboarding/init. Completing again keeps the first completion time.',
        security: [{ DashboardJWT: [] }],
        body: z.object({ tenantId: z.uuid() }),
        response: {
          200: z.object({ tenantId: z.uuid(), onboarding: Onboarding }).meta({ id: 'OnboardingCompleted' }),
          400: PlatformError,
          401: PlatformError,
          404: PlatformError,
          409: PlatformError,
        },
      },
    },
    async (request) => {
      const { tenantId } = request.body;
      const result = await completeOnboarding(app.db, tenantId, request.license!.purchaserEmail);
      if (result.kind === 'not_found') throw new PlatformHttpError(404, 'not_found', 'No such tenant.');
      if (result.kind === 'not_started')
        throw new PlatformHttpError(409, 'onboarding_not_started', 'Start with POST /api/onboarding/init.');
      request.log.info({ tenantId, licenseId: request.license!.id }, 'onboarding completed');
      return { tenantId, onboarding: result.onboarding };
    },
  );
};

export default onboardingRoutes;
