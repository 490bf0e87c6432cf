// GET /: what this service is and where to start, for a person with a
// browser. Readiness is the same check GET /readyz answers.
import type { FastifyPluginAsync } from 'fastify';
import { resources } from '../../../core/identity/tokens.ts';
import { html, sendPage } from '../../pages/layout.ts';
import { readiness } from '../health/index.ts';
import { protectedResourceMetadataUrl } from '../identity/metadata.ts';
import { MANIFEST_PATH } from '../contracts/llms.ts';
import { CLAIM_PAGE_PREFIX } from '../identity/claim-page.ts';

const landingRoutes: FastifyPluginAsync = async (app) => {
  const { baseUrl, authUrl } = app.config;
  const { mcp } = resources(baseUrl);
  /** A link whose text is the deployment's absolute URL; the href stays on this host. */
  const link = (path: string, url = `${baseUrl}${path}`) => html`<a class="url" href="${path}">${url}</a>`;
  const agentMetadata = protectedResourceMetadataUrl(baseUrl, 'api/agent');
  const mcpMetadata = protectedResourceMetadataUrl(baseUrl, 'mcp');
  // The claim pages are served at the identity provider's origin.
  const claimPage = `${authUrl}${CLAIM_PAGE_PREFIX}`;

  app.get('/', { schema: { hide: true } }, async (request, reply) => {
    const ready = await readiness(app, request.log);
    const status =
      ready.status === 'ready'
        ? html`<span class="ok">ready</span>`
        : html`<span class="bad">not ready</span> (database ${ready.checks.database}, migrations ${ready.checks.migrations}, job events ${ready.checks.jobEvents}${ready.checks.shuttingDown ? ', shutting down' : ''})`;
    return sendPage(reply, {
      title: 'Agent platform',
      body: html`<p>An agent platform: AI agents carry out tasks for companies inside workspaces (tenants).
Agents register at the identity provider, get short-lived tokens and work through the Agent API;
people, dashboards and integrations use the platform API.</p>
<p>Status: ${status} — ${link('/readyz')}</p>
<h2>Sign in</h2>
<ul class="links" id="sign-in">
<li><a href="/account">Your account</a> — sign in with your e-mail and password to see your workspaces and your role in each</li>
<li><a href="/console">Operator console</a> — operators sign in to watch and steer the queue, the workers, the schedules and the tenants</li>
<li><a href="${claimPage}">Claim an agent</a> — the link an agent, an invitation or a board waiting for approval gives you opens its own sign-in form; this page says how</li>
<li>Apps and dashboards sign people in through the API: <code>POST /api/auth/login</code> (see the API reference)</li>
</ul>
<h2>The manual</h2>
<ul class="links" id="manual">
<li><a href="/docs">API reference</a> — every endpoint of this deployment, with its parameters and answers, browsable and tried from the page</li>
<li>Running and operating the service: the <code>docs/</code> folder of its source, starting at <code>docs/README.md</code></li>
</ul>
<h2>Start here</h2>
<ul class="links">
<li>${link('/docs/llms.txt')} — the index an LLM agent reads first</li>
<li>${link('/auth.md')} — registration, claim and tokens for agents</li>
<li>${link('/openapi.json')} (${link('/openapi.yaml')}) — OpenAPI 3.1 description of every API</li>
<li>${link('/arazzo.yaml')} — Arazzo workflow: register, get a token, read capabilities, list boards</li>
<li>${link(MANIFEST_PATH)} — versions and SHA-256 hashes of these documents</li>
</ul>
<h2>For machines</h2>
<ul class="links">
<li>${link('/mcp', mcp)} — the remote MCP endpoint (Streamable HTTP) for MCP clients; its tools mirror the Agent API and need a token for this resource</li>
<li>${link('/.well-known/oauth-protected-resource/api/agent', agentMetadata)} and ${link('/.well-known/oauth-protected-resource/mcp', mcpMetadata)} — RFC 9728 protected-resource metadata</li>
<li><span class="url">${authUrl}</span> — the identity provider (agent registration and the token endpoint)</li>
</ul>`,
    });
  });
};

export default landingRoutes;
