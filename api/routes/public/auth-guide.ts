// GET {base_url}/auth.md: the registration guide an agent reads. Written for
// this service's real behaviour, with this deployment's URLs filled in.
import type { FastifyPluginAsync } from 'fastify';
import { POST_CLAIM_SCOPES, PRE_CLAIM_SCOPES } from '../../../core/identity/tokens.ts';

export function authGuide(baseUrl: string, authUrl: string, accessTtlS: number, assertionTtlS: number): string {
  const grant = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
  return `# Agent registration and authentication

Service: ${baseUrl}
Identity provider: ${authUrl}
Agent API: ${baseUrl}/api/agent/v1 (resource \`${baseUrl}/api/agent\`)
MCP endpoint: ${baseUrl}/mcp (resource \`${baseUrl}/mcp\`)

All identity-provider errors are JSON \`{"code": "...", "message": "..."}\`
(\`retry_after\` in seconds on \`rate_limit_exceeded\`). On 5xx, back off and
retry the same request; on other 4xx, fix the request as the code says and do
not replay it unchanged.

## 1. Reuse what you stored

If you stored a registration (assertion, refresh token, claim token), reuse it:
go to step 4. Store these three values like passwords; never put them in a URL
or a log.

## 2. Register

\`\`\`http
POST ${authUrl}/agent/identity
Content-Type: application/json

{"type": "anonymous"}
\`\`\`

201 returns:

\`\`\`json
{
  "registration": {"id": "…", "type": "anonymous", "claim_state": "unclaimed"},
  "identity": {"assertion": "<JWT>", "assertion_expires_in": ${assertionTtlS},
               "refresh_token": {"value": "art_…"}, "principal_id": "…", "workspace_id": "…"},
  "claim": {"token": "ct_…", "expires_in": …, "claim_endpoint": "${authUrl}/agent/identity/claim"}
}
\`\`\`

An anonymous registration gets a new, isolated free workspace and can work at
once (trial). Use \`{"type": "service_auth", "login_hint": "<EMAIL>"}\` when the
person you work for has an account and you need post-claim access: it returns
only \`claim.token\` (\`identity\` is null) until the claim verifies (step 3).

Errors: \`invalid_request\` (fix the body), \`invalid_login_hint\` (fix the
e-mail), \`anonymous_registration_disabled\` / \`service_auth_registration_disabled\`
(use the other type), \`rate_limit_exceeded\` (wait \`retry_after\`).

## 3. Claim (optional for anonymous, required for service_auth)

A claim binds your workspace to a verified person. It keeps the workspace and
never merges it into another account.

\`\`\`http
POST ${authUrl}/agent/identity/claim
Content-Type: application/json

{"type": "service_auth", "claim_token": "ct_…", "login_hint": "<EMAIL>"}
\`\`\`

200 returns \`{"attempt": {"id": "…", "verification_uri": "${authUrl}/agent/identity/claim/verify/…", "expires_in": 600, "interval": 5}}\`.
Give \`verification_uri\` to the person. It carries no credential: they sign in
there with their own account (the one of \`login_hint\`), see which agent and
workspace they are claiming, confirm, and are shown a user code such as
\`BCDF-GHJK\`. The code is shown to the person only; ask them for it.

\`\`\`http
POST ${authUrl}/agent/identity/claim/complete
Content-Type: application/json

{"claim_token": "ct_…", "user_code": "BCDF-GHJK"}
\`\`\`

Success returns the verified identity once (\`identity.assertion\`,
\`identity.refresh_token.value\`): store it, replacing what you had.

| Code | What to do |
|---|---|
| \`claim_not_confirmed\` | The person has not confirmed yet: wait \`interval\` seconds and retry |
| \`invalid_user_code\` | Ask the person for the code again (case and dashes do not matter) |
| \`user_code_expired\` | Run the claim step again for a fresh link |
| \`organization_selection_required\`, \`stale_organization_selection\` | The person picks an organization on the claim page, then retry |
| \`too_many_attempts\` | Wait for a pending attempt to expire |
| \`claim_expired\`, \`claim_revoked\`, \`already_claimed\`, \`claim_denied\`, \`invalid_claim_token\` | Register again |
| \`auth_method_disabled\`, \`invalid_login_hint\` | Fix or use the other registration type |

## 4. Get an access token

\`\`\`http
POST ${authUrl}/oauth2/token
Content-Type: application/x-www-form-urlencoded

grant_type=${encodeURIComponent(grant)}&assertion=<JWT>&resource=${encodeURIComponent(`${baseUrl}/api/agent`)}
\`\`\`

Returns \`{"access_token": "…", "token_type": "Bearer", "expires_in": ${accessTtlS}, "scope": "…"}\`.
The token lives about ${Math.round(accessTtlS / 60)} minutes; do not store it, repeat this
exchange when it expires. Use \`resource=${baseUrl}/mcp\` for the MCP endpoint:
a token is valid only for the resource it was issued for.

Scopes before a claim: ${PRE_CLAIM_SCOPES.map((s) => `\`${s}\``).join(', ')}.
After a claim: ${POST_CLAIM_SCOPES.map((s) => `\`${s}\``).join(', ')}.

Errors carry \`code\` and the OAuth \`error\`: \`invalid_request\` (the assertion
cannot be decoded, or a field is missing), \`invalid_grant\` (the assertion
expired or its registration is revoked: refresh or register again),
\`invalid_target\` (use one of the two resources above),
\`unsupported_grant_type\`.

## 5. Refresh before the assertion expires

\`\`\`http
POST ${authUrl}/agent/identity
Content-Type: application/json

{"type": "refresh", "refresh_token": "art_…"}
\`\`\`

Returns the same registration with a new assertion and a new refresh token;
overwrite both. A refresh token works once. Presenting an old one again is
refused (\`invalid_refresh_token\`) and also revokes the current one, since a copy
exists: register again.

## 6. Call the Agent API

Send \`Authorization: Bearer <access_token>\` to ${baseUrl}/api/agent/v1/* only.
Start with \`GET ${baseUrl}/api/agent/v1/capabilities\`: it is the authority for
your identity, claim state, plan, quota, models, setup and approval state, and
lists \`next_actions\` (for example \`claim_account\` with the endpoint to call).
A URL meant for a person is for the person and never carries your token.

A 401 carries \`WWW-Authenticate: Bearer resource_metadata="${baseUrl}/.well-known/oauth-protected-resource/api/agent"\`
and one of \`invalid_credential\` (get a new token), \`registration_revoked\`,
\`principal_not_linked\`, \`identity_conflict\` (register or claim again). A 403
\`scope_denied\` names the scope you lack (\`claim_required\` means: claim first);
a 403 \`tenant_inactive\` means the operator suspended your workspace: stop, and
tell your person (registering again does not get around it). Once claimed,
you act with your person's current role in the workspace: a Viewer's agent
only reads, and a change their role does not allow answers 403
\`insufficient_role\` (\`next_action: raise_claimer_role\`: ask them to have a
workspace Admin raise it, then send the same request again). Capabilities
list what you may do under \`access\`.

Discovery: ${authUrl}/.well-known/oauth-authorization-server,
${authUrl}/.well-known/jwks.json,
${baseUrl}/.well-known/oauth-protected-resource/api/agent and
${baseUrl}/.well-known/oauth-protected-resource/mcp.
`;
}

const authGuideRoute: FastifyPluginAsync = async (app) => {
  const { baseUrl, authUrl, identity } = app.config;
  const body = authGuide(baseUrl, authUrl, identity.accessTokenTtlS, identity.assertionTtlS);
  app.get('/auth.md', { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/markdown; charset=utf-8').header('cache-control', 'public, max-age=300').send(body),
  );
};

export default authGuideRoute;
