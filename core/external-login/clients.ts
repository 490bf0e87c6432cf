// Talking to the external OpenID Connect providers: discovery (cached per
// client, retried after a failure), the openid-client Configuration that does
// PKCE, state, nonce, code exchange and ID-token validation, the provider's
// JWKS for tokens that arrive without a code exchange (an iOS app's ID token,
// altidp's direct identity token and signed notifications), and the mapping
// of every provider failure to one clear error.
import { createRemoteJWKSet, errors as joseErrors, importJWK, jwtVerify, type JWTPayload } from 'jose';
import * as oidc from 'openid-client';
import type { Config } from '../config.ts';
import type { ClientAuthSetting, ExternalLoginSettings, ExternalProvider } from './settings.ts';

export class ExternalLoginError extends Error {
  override name = 'ExternalLoginError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const PROVIDER_TIMEOUT_MS = 10_000;

const perConfig = new WeakMap<Config, OidcClients>();

/**
 * The process's clients for this configuration: every route and job shares
 * one discovery per issuer, one JWKS cache and one Configuration per client.
 */
export function oidcClientsFor(config: Config): OidcClients {
  let clients = perConfig.get(config);
  if (!clients) {
    clients = new OidcClients(config.externalLogin);
    perConfig.set(config, clients);
  }
  return clients;
}
const isHttp = (issuer: string) => issuer.startsWith('http:');

async function clientAuthentication(
  auth: ClientAuthSetting | undefined,
  methods: string[] | undefined,
): Promise<oidc.ClientAuth> {
  if (!auth) return oidc.None();
  if (auth.kind === 'private_key') {
    const alg = typeof auth.jwk.alg === 'string' ? auth.jwk.alg : auth.jwk.kty === 'EC' ? 'ES256' : 'RS256';
    const key = (await importJWK(auth.jwk as never, alg)) as CryptoKey;
    return oidc.PrivateKeyJwt({ key, kid: typeof auth.jwk.kid === 'string' ? auth.jwk.kid : undefined });
  }
  // client_secret_post where offered (some providers accept nothing else), else Basic.
  return !methods || methods.includes('client_secret_post')
    ? oidc.ClientSecretPost(auth.secret)
    : oidc.ClientSecretBasic(auth.secret);
}

type JwksGetter = ReturnType<typeof createRemoteJWKSet>;

export class OidcClients {
  private readonly servers = new Map<string, Promise<oidc.ServerMetadata>>();
  private readonly configurations = new Map<string, Promise<oidc.Configuration>>();
  private readonly keySets = new Map<string, JwksGetter>();

  constructor(private readonly settings: ExternalLoginSettings) {}

  /** The openid-client Configuration of one of our clients at a provider (its issuer discovered once). */
  configuration(provider: ExternalProvider, clientId: string, auth?: ClientAuthSetting): Promise<oidc.Configuration> {
    const issuer = this.settings[provider].issuer!;
    const key = `${provider}|${clientId}|${auth ? 'auth' : 'public'}`;
    return this.cached(this.configurations, key, () => this.build(issuer, clientId, auth));
  }

  /** A failed attempt is not cached: the next login tries again. */
  private cached<T>(map: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
    let pending = map.get(key);
    if (!pending) {
      pending = make();
      pending.catch(() => map.delete(key));
      map.set(key, pending);
    }
    return pending;
  }

  private async build(
    issuer: string,
    clientId: string,
    auth: ClientAuthSetting | undefined,
  ): Promise<oidc.Configuration> {
    const insecure = isHttp(issuer);
    const server = await this.cached(this.servers, issuer, async () => {
      const options = { timeout: PROVIDER_TIMEOUT_MS / 1000, execute: insecure ? [oidc.allowInsecureRequests] : [] };
      try {
        return (await oidc.discovery(new URL(issuer), clientId, undefined, oidc.None(), options)).serverMetadata();
      } catch (error) {
        throw providerFailure(error, 'discovery');
      }
    });
    try {
      // openid-client expects RS256 ID tokens unless told otherwise.
      const algs = server.id_token_signing_alg_values_supported;
      const metadata =
        algs && algs.length > 0 && !algs.includes('RS256') ? { id_token_signed_response_alg: algs[0] } : undefined;
      const config = new oidc.Configuration(
        server,
        clientId,
        metadata,
        await clientAuthentication(auth, server.token_endpoint_auth_methods_supported),
      );
      if (insecure) oidc.allowInsecureRequests(config);
      config.timeout = PROVIDER_TIMEOUT_MS / 1000;
      return config;
    } catch (error) {
      throw providerFailure(error, 'discovery');
    }
  }

  /**
   * Verifies an ID token that reached us directly (not from our own code
   * exchange): signature by the provider's JWKS, issuer, one of the accepted
   * audiences, expiry, and the nonce when the caller gives one or the token
   * carries one.
   */
  async verifyIdToken(
    provider: ExternalProvider,
    token: string,
    check: { audiences: string[]; nonce?: string },
  ): Promise<JWTPayload> {
    const payload = await this.verifyJwt(
      provider,
      token,
      check.audiences,
      ['sub', 'exp', 'iat'],
      'invalid_id_token',
      'ID token',
    );
    if (typeof payload.azp === 'string' && !check.audiences.includes(payload.azp)) {
      throw new ExternalLoginError(401, 'invalid_id_token', 'The ID token was issued to another client (azp).');
    }
    if ((payload.nonce !== undefined || check.nonce !== undefined) && payload.nonce !== check.nonce) {
      throw new ExternalLoginError(
        401,
        'invalid_id_token',
        check.nonce === undefined
          ? 'The ID token carries a nonce; send the nonce it was requested with.'
          : 'The ID token was not issued for this nonce.',
      );
    }
    return payload;
  }

  /** Verifies any JWS the provider signed (ID tokens, notifications) against its JWKS. */
  async verifyJwt(
    provider: ExternalProvider,
    token: string,
    audiences: string[],
    requiredClaims: string[],
    code: string,
    what: string,
  ): Promise<JWTPayload> {
    const config = await this.configuration(provider, this.settings[provider].clientId ?? audiences[0]!);
    const metadata = config.serverMetadata();
    if (!metadata.jwks_uri)
      throw new ExternalLoginError(502, 'provider_unavailable', 'The provider publishes no jwks_uri.');
    let keys = this.keySets.get(metadata.jwks_uri);
    if (!keys) {
      keys = createRemoteJWKSet(new URL(metadata.jwks_uri), {
        timeoutDuration: PROVIDER_TIMEOUT_MS,
        cooldownDuration: 30_000,
      });
      this.keySets.set(metadata.jwks_uri, keys);
    }
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: metadata.issuer,
        audience: audiences,
        requiredClaims,
        clockTolerance: 30,
      });
      return payload;
    } catch (error) {
      if (
        error instanceof joseErrors.JWKSTimeout ||
        (error instanceof TypeError && !(error instanceof joseErrors.JOSEError))
      ) {
        throw new ExternalLoginError(
          502,
          'provider_unavailable',
          "The provider's signing keys could not be fetched; try again.",
        );
      }
      throw new ExternalLoginError(401, code, `The ${what} was refused: ${joseReason(error)}.`);
    }
  }
}

function joseReason(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return 'it has expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed)
    return `its "${error.claim}" claim is not what this service expects (${error.reason})`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'its signature does not verify';
  if (error instanceof joseErrors.JWKSNoMatchingKey) return "it is not signed by any of the provider's keys";
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported)
    return 'it is not signed with an accepted algorithm';
  return 'it is not a valid signed JWT';
}

/**
 * Maps an openid-client / network failure to our error: the provider being
 * down is 502; a refusal of what the caller sent (a used or wrong code, a bad
 * token) is the caller's 4xx with the provider's own reason.
 */
export function providerFailure(error: unknown, step: 'discovery' | 'code' | 'token' | 'userinfo'): ExternalLoginError {
  if (error instanceof ExternalLoginError) return error;
  if (error instanceof oidc.ResponseBodyError) {
    if (error.status >= 500)
      return new ExternalLoginError(502, 'provider_unavailable', `The provider answered ${error.status}; try again.`);
    const reason = `${error.error}${error.error_description ? `: ${error.error_description}` : ''}`;
    if (step === 'code')
      return new ExternalLoginError(
        401,
        'invalid_code',
        `The provider refused the authorization code (${reason}); it may be used, expired, or for another redirect URI or code verifier.`,
      );
    return new ExternalLoginError(401, 'invalid_access_token', `The provider refused the token (${reason}).`);
  }
  if (error instanceof oidc.WWWAuthenticateChallengeError) {
    return new ExternalLoginError(401, 'invalid_access_token', 'The provider does not accept this access token.');
  }
  if (error instanceof oidc.AuthorizationResponseError) {
    return new ExternalLoginError(
      401,
      'access_denied',
      `The provider answered ${error.error}${error.error_description ? `: ${error.error_description}` : ''}.`,
    );
  }
  if (error instanceof oidc.ClientError) {
    // openid-client wraps oauth4webapi's precise reason (which claim failed) as the cause.
    const message = (error.cause instanceof Error ? error.cause.message : error.message).replace(/\.$/, '');
    if (
      step === 'discovery' ||
      error.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' ||
      error.code === 'OAUTH_RESPONSE_IS_NOT_JSON'
    ) {
      return new ExternalLoginError(502, 'provider_unavailable', `The provider's answer is not usable (${message}).`);
    }
    return new ExternalLoginError(401, 'invalid_id_token', `The provider's ID token was refused: ${message}.`);
  }
  return new ExternalLoginError(
    502,
    'provider_unavailable',
    `The provider could not be reached (${(error as Error)?.message ?? 'unknown error'}); try again.`,
  );
}
