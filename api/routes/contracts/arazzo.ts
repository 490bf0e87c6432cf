// The Arazzo quickstart served at {base_url}/arazzo.yaml: the agent credential
// flow (register, exchange, capabilities) and a first board read, written
// against the operationIds of the served OpenAPI document so a stock runner
// (redocly respect, the test suite) can execute it as is.
import { JWT_BEARER } from '../identity/token.ts';
import { resources } from '../../../core/identity/tokens.ts';

/** Version of the published contract documents written here (Agent API v1). */
export const CONTRACT_VERSION = '1.0.0';

// Strings go through JSON.stringify: a JSON string is a valid YAML
// double-quoted scalar, so URLs and the grant URN never need hand escaping.
const q = (value: string) => JSON.stringify(value);

export function arazzoQuickstart(baseUrl: string): string {
  const op = (id: string) => `$sourceDescriptions.agentPlatform.${id}`;
  const bearer = q('Bearer {$steps.exchangeToken.outputs.accessToken}');
  return `arazzo: 1.0.1
info:
  title: Agent platform quickstart
  version: ${q(CONTRACT_VERSION)}
  summary: Register an agent, get an access token, read capabilities and boards.
  description: >-
    The agent credential flow of ${baseUrl}/auth.md as a runnable workflow.
    The registration's assertion is a long-lived credential and the access
    token lives about five minutes: store the first like a password, never
    store the second, and never put either in a URL or a log.
sourceDescriptions:
  - name: agentPlatform
    url: ${q(`${baseUrl}/openapi.json`)}
    type: openapi
workflows:
  - workflowId: agentQuickstart
    summary: Anonymous registration to a first Agent API read
    description: >-
      An anonymous registration gets a new, isolated free workspace at once
      (no person involved). Claiming it later is optional; see auth.md.
    steps:
      - stepId: registerAnonymously
        description: Register with the identity provider (rate limited per IP address).
        operationId: ${op('registerAgentIdentity')}
        requestBody:
          contentType: application/json
          payload:
            type: anonymous
        successCriteria:
          - condition: $statusCode == 201
          - condition: $response.body#/registration/type == 'anonymous'
        outputs:
          assertion: $response.body#/identity/assertion
          workspaceId: $response.body#/identity/workspace_id
      - stepId: exchangeToken
        description: JWT-bearer grant for a token whose audience is the Agent API.
        operationId: ${op('exchangeToken')}
        requestBody:
          contentType: application/x-www-form-urlencoded
          payload:
            grant_type: ${q(JWT_BEARER)}
            assertion: $steps.registerAnonymously.outputs.assertion
            resource: ${q(resources(baseUrl).agent)}
        successCriteria:
          - condition: $statusCode == 200
          - condition: $response.body#/token_type == 'Bearer'
        outputs:
          accessToken: $response.body#/access_token
          scope: $response.body#/scope
      - stepId: getCapabilities
        description: The authority for identity, claim state, plan, quota, models and next actions.
        operationId: ${op('getAgentCapabilities')}
        parameters:
          - name: Authorization
            in: header
            value: ${bearer}
        successCriteria:
          - condition: $statusCode == 200
          - condition: $response.body#/identity/workspace/id == $steps.registerAnonymously.outputs.workspaceId
        outputs:
          claimState: $response.body#/claim/state
          plan: $response.body#/plan/name
      - stepId: listBoards
        description: A first read with the svc:boards:read scope (an anonymous workspace starts with no boards).
        operationId: ${op('listInsightBoards')}
        parameters:
          - name: Authorization
            in: header
            value: ${bearer}
          - name: limit
            in: query
            value: 10
        successCriteria:
          - condition: $statusCode == 200
        outputs:
          boards: $response.body#/items
    outputs:
      workspaceId: $steps.registerAnonymously.outputs.workspaceId
      claimState: $steps.getCapabilities.outputs.claimState
      plan: $steps.getCapabilities.outputs.plan
      boards: $steps.listBoards.outputs.boards
`;
}
