// Provider keys: a tenant's own model-provider keys. Writes are "HMAC + Auth"
// (api/plugins/hmac-signature.ts) and need Admin; the list and the mode show
// keys masked to their last four characters to any member; only the resolve
// route returns a key in clear, to an Admin, and leaves an audit log line.
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Keyring } from '../../../core/crypto/keyring.ts';
import {
  auditKey,
  creditBalance,
  deleteKey,
  formatDollars,
  listMasked,
  putKey,
  resolveKey,
} from '../../../core/provider-keys/keys.ts';
import { PlatformError, PlatformHttpError } from '../../errors.ts';
import hmacSignature, { issueSigningKey, keepRawJsonBody, SignatureHeaders } from '../../plugins/hmac-signature.ts';
import { OptionalTenantHeaders } from '../../plugins/tenant.ts';
import { assertTenantBaseUrl, BASE_URL_RULES } from './base-url.ts';
import { ApiKey, BaseUrl, KeyedProviderId, MaskedProviderKey, ProviderKeyMode, SavedProviderKey } from './schemas.ts';

const tags = ['provider-keys'];
const security = [{ PlatformJWT: [] }];
const ProviderParams = z.object({ provider: KeyedProviderId });
const SignedHeaders = OptionalTenantHeaders.extend(SignatureHeaders.shape);

const SIGNED = [
  'HMAC + Auth: platform JWT, x-tenant-id (Admin), and a signature:',
  '`x-signature-timestamp` (unix seconds, within 300 s) and `x-signature: v1=<hex>` =',
  'HMAC-SHA256 keyed with the signing key from GET /api/provider-keys/signing-key over',
  '`METHOD\\npath\\nx-tenant-id\\ntimestamp\\nsha256hex(body)`. Each signature is accepted once.',
  '401: unauthorized, signature_required, signature_expired, invalid_signature, signature_replayed.',
].join(' ');

const providerKeyRoutes: FastifyPluginAsyncZod = async (app) => {
  if (!app.hasDecorator('requireSignature')) await app.register(hmacSignature);
  // Only in this plugin's context: the signature covers the exact body bytes.
  keepRawJsonBody(app);

  const keyring = Keyring.fromConfig(app.config);
  const viewer = { onRequest: app.requireUser, preValidation: app.requireWorkspace('viewer') };
  const admin = { onRequest: app.requireUser, preValidation: app.requireWorkspace('admin') };
  const signedAdmin = {
    onRequest: app.requireUser,
    preValidation: app.requireWorkspace('admin'),
    preHandler: app.requireSignature,
  };
  const tenantErrors = { 400: PlatformError, 401: PlatformError, 403: PlatformError, 404: PlatformError };

  app.get(
    '/api/provider-keys/signing-key',
    {
      onRequest: app.requireUser,
      schema: {
        operationId: 'getProviderKeySigningKey',
        tags,
        summary: "The caller's signing key for HMAC + Auth requests (PUT and DELETE /api/provider-keys/:provider)",
        description:
          'Derived on the server for the authenticated user and valid until `expiresAt` (about two days); never sent with the ' +
          'requests it signs. Key the HMAC with the UTF-8 bytes of `signingKey` as returned.',
        security,
        response: {
          200: z
            .object({
              signingKey: z.string(),
              algorithm: z.literal('HMAC-SHA256'),
              expiresAt: z.iso.datetime(),
              stringToSign: z.string().describe('The layout of the signed string'),
            })
            .meta({ id: 'ProviderKeySigningKey' }),
          401: PlatformError,
        },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      const issued = issueSigningKey(app.config.secrets.PLATFORM_JWT_SECRET, request.user!.userId);
      return {
        ...issued,
        algorithm: 'HMAC-SHA256' as const,
        stringToSign: 'METHOD\\npath\\nx-tenant-id\\ntimestamp\\nsha256hex(body)',
      };
    },
  );

  app.put(
    '/api/provider-keys/:provider',
    {
      ...signedAdmin,
      schema: {
        operationId: 'putProviderKey',
        tags,
        summary: "Save or replace the tenant's key for a provider (sealed before storage)",
        description: `${SIGNED} The response shows the key masked; it is not checked against the provider (POST /api/onboarding/setup does that). ${BASE_URL_RULES}`,
        security,
        headers: SignedHeaders,
        params: ProviderParams,
        body: z.object({ apiKey: ApiKey, baseUrl: BaseUrl.optional() }),
        response: { 200: SavedProviderKey, ...tenantErrors, 415: PlatformError },
      },
    },
    async (request) => {
      await assertTenantBaseUrl(app.config, request.body.baseUrl);
      const saved = await app.db.transaction(async (tx) => {
        const row = await putKey(tx, keyring, {
          tenantId: request.tenant!.id,
          provider: request.params.provider,
          apiKey: request.body.apiKey,
          baseUrl: request.body.baseUrl,
          userId: request.user!.userId,
        });
        await auditKey(tx, {
          tenantId: request.tenant!.id,
          provider: row.provider,
          action: 'saved',
          userId: request.user!.userId,
          requestId: request.id,
        });
        return row;
      });
      request.log.info(
        { tenantId: request.tenant!.id, provider: saved.provider, userId: request.user!.userId },
        'provider key saved',
      );
      return {
        provider: saved.provider,
        masked: saved.masked,
        last4: saved.last4,
        baseUrl: saved.baseUrl,
        updatedAt: saved.updatedAt,
      };
    },
  );

  app.delete(
    '/api/provider-keys/:provider',
    {
      ...signedAdmin,
      schema: {
        operationId: 'deleteProviderKey',
        tags,
        summary: "Remove the tenant's key for a provider",
        description: `${SIGNED} Sign an empty body (sha256 of the empty string). 404 when the tenant has no key for the provider.`,
        security,
        headers: SignedHeaders,
        params: ProviderParams,
        response: { 204: z.undefined().describe('Removed'), ...tenantErrors, 415: PlatformError },
      },
    },
    async (request, reply) => {
      const removed = await app.db.transaction(async (tx) => {
        const gone = await deleteKey(tx, request.tenant!.id, request.params.provider);
        if (gone)
          await auditKey(tx, {
            tenantId: request.tenant!.id,
            provider: request.params.provider,
            action: 'deleted',
            userId: request.user!.userId,
            requestId: request.id,
          });
        return gone;
      });
      if (!removed) throw new PlatformHttpError(404, 'not_found', 'The tenant has no key for this provider.');
      request.log.info(
        { tenantId: request.tenant!.id, provider: request.params.provider, userId: request.user!.userId },
        'provider key deleted',
      );
      return reply.code(204).send();
    },
  );

  app.get(
    '/api/provider-keys/',
    {
      ...viewer,
      schema: {
        operationId: 'listProviderKeys',
        tags,
        summary: "The tenant's keys, masked to their last four characters",
        security,
        headers: OptionalTenantHeaders,
        response: {
          200: z.object({ keys: z.array(MaskedProviderKey) }).meta({ id: 'ProviderKeyList' }),
          ...tenantErrors,
        },
      },
    },
    async (request) => ({ keys: await listMasked(app.db, request.tenant!.id) }),
  );

  app.get(
    '/api/provider-keys/mode',
    {
      ...viewer,
      schema: {
        operationId: 'getProviderKeyMode',
        tags,
        summary: 'Key mode (user-provided or platform credits) and the remaining credit balance',
        security,
        headers: OptionalTenantHeaders,
        response: { 200: ProviderKeyMode, ...tenantErrors },
      },
    },
    async (request) => {
      const tenantId = request.tenant!.id;
      const [keys, balance] = await Promise.all([listMasked(app.db, tenantId), creditBalance(app.db, tenantId)]);
      return {
        mode: keys.length > 0 ? ('user_provided' as const) : ('platform_credits' as const),
        providers: keys.map((k) => k.provider),
        creditBalanceMicros: balance,
        creditBalance: formatDollars(balance),
      };
    },
  );

  app.get(
    '/api/provider-keys/:provider/resolve',
    {
      ...admin,
      schema: {
        operationId: 'resolveProviderKey',
        tags,
        summary: 'The decrypted key (Admin); every call is audit-logged',
        security,
        headers: OptionalTenantHeaders,
        params: ProviderParams,
        response: {
          200: z
            .object({ provider: KeyedProviderId, apiKey: z.string(), baseUrl: z.string().nullable() })
            .meta({ id: 'ResolvedProviderKey' }),
          ...tenantErrors,
        },
      },
    },
    async (request, reply) => {
      const resolved = await resolveKey(app.db, keyring, request.tenant!.id, request.params.provider);
      if (!resolved) throw new PlatformHttpError(404, 'not_found', 'The tenant has no key for this provider.');
      // The audit trail: who read which key, never the key.
      await auditKey(app.db, {
        tenantId: request.tenant!.id,
        provider: resolved.provider,
        action: 'resolved',
        userId: request.user!.userId,
        requestId: request.id,
      });
      request.log.info(
        { tenantId: request.tenant!.id, provider: resolved.provider, userId: request.user!.userId },
        'provider key resolved',
      );
      reply.header('cache-control', 'no-store');
      return resolved;
    },
  );
};

export default providerKeyRoutes;
