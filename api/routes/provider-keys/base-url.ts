// The save-time half of the outbound policy (core/providers/outbound.ts),
// shared by PUT /api/provider-keys/:provider and POST /api/onboarding/setup:
// a tenant's base URL that would lead to a private address is refused before
// anything is stored or called.
import type { Config } from '../../../core/config.ts';
import { tenantBaseUrlProblem } from '../../../core/providers/outbound.ts';
import { PlatformHttpError } from '../../errors.ts';

export const BASE_URL_RULES =
  'A `baseUrl` must be http(s), without a user name or password, and (unless the operator set PROVIDER_ALLOW_PRIVATE_URLS) ' +
  'must resolve to public addresses only: loopback, private, link-local, CGNAT and other non-public addresses are 400 invalid_base_url.';

/** Throws 400 invalid_base_url naming the reason; a missing baseUrl passes. */
export async function assertTenantBaseUrl(
  config: Pick<Config, 'providers'>,
  baseUrl: string | undefined,
): Promise<void> {
  if (baseUrl === undefined) return;
  const problem = await tenantBaseUrlProblem(baseUrl, { allowPrivateUrls: config.providers.allowPrivateUrls });
  if (problem)
    throw new PlatformHttpError(400, 'invalid_base_url', `baseUrl is not allowed: ${problem}. Nothing was saved.`);
}
