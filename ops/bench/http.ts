// HTTP figures: requests/s through real sockets (keep-alive, N concurrent
// loops) for a bare Fastify route, the JWT-bearer token exchange, an
// authenticated Agent API read and the same read as an MCP tool call, all in
// this run.
import http from 'node:http';
import Fastify from 'fastify';
import { buildApp } from '../../api/app.ts';
import type { Config } from '../../core/config.ts';
import { createRegistration } from '../../core/identity/registrations.ts';
import { signAssertion } from '../../core/identity/tokens.ts';
import { JobEventHub } from '../../core/jobs/events.ts';
import { GroupCommitter } from '../../core/jobs/group-commit.ts';
import { throughput, type Throughput } from './measure.ts';
import type { BenchContext } from './scenarios.ts';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function call(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function load(seconds: number, concurrency: number, request: () => Promise<number>): Promise<Throughput> {
  let failures = 0;
  const result = await throughput(concurrency, seconds, async () => {
    const status = await request();
    if (status !== 200) failures++;
  });
  if (failures > 0) throw new Error(`${failures} requests failed during the measurement`);
  return result;
}

export async function httpFigures(ctx: BenchContext, config: Config) {
  const concurrency = 16;
  const bare = Fastify({ logger: false });
  bare.get('/bare', async () => ({ ok: true }));
  await bare.listen({ host: '127.0.0.1', port: 0 });
  const barePort = (bare.server.address() as { port: number }).port;

  const hub = new JobEventHub(ctx.url, ctx.db, ctx.logger);
  await hub.start();
  const quiet = { ...config, logLevel: 'warn' };
  const app = await buildApp({ config: quiet, db: ctx.db, jobEvents: hub, jobs: new GroupCommitter(ctx.db) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;

  const { registration } = await createRegistration(ctx.db, {
    type: 'anonymous',
    ip: '127.0.0.1',
    claimTokenTtlS: 3600,
  });
  const assertion = await signAssertion(
    app.idpKeys,
    config.authUrl,
    { registrationId: registration.id, principalId: registration.principal_id },
    3600,
  );
  const form = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
    assertion,
    resource: `${config.baseUrl}/api/agent`,
  }).toString();
  const formHeaders = {
    'content-type': 'application/x-www-form-urlencoded',
    'content-length': String(Buffer.byteLength(form)),
  };
  const tokenResponse = await app.inject({ method: 'POST', url: '/oauth2/token', headers: formHeaders, payload: form });
  const bearer = { authorization: `Bearer ${tokenResponse.json().access_token}` };
  // The same operation as a tool call at /mcp (its own token audience).
  const mcpForm = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
    assertion,
    resource: `${config.baseUrl}/mcp`,
  }).toString();
  const mcpToken = (
    await app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: mcpForm,
    })
  ).json().access_token;
  const mcpBody = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'getAgentMe', arguments: {} },
  });
  const mcpHeaders = {
    authorization: `Bearer ${mcpToken}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
    'content-length': String(Buffer.byteLength(mcpBody)),
  };
  const probe = await app.inject({ method: 'POST', url: '/mcp', headers: mcpHeaders, payload: mcpBody });
  if (probe.statusCode !== 200 || probe.json().result?.isError)
    throw new Error(`the MCP tool call fails: ${probe.body}`);
  const mcpCall = () => call(port, 'POST', '/mcp', mcpHeaders, mcpBody);

  try {
    await load(1, concurrency, () => call(barePort, 'GET', '/bare')); // warm-up
    await load(1, concurrency, () => call(port, 'GET', '/api/agent/v1/me', bearer));
    // Alternate the two in short rounds and keep each one's best, so a burst
    // of other work on this 2-core machine does not decide the ratio.
    let bareRate = 0;
    let me = 0;
    let mcp = 0;
    await load(1, concurrency, mcpCall);
    const round = Math.max(1, ctx.seconds / 3);
    for (let i = 0; i < 3; i++) {
      bareRate = Math.max(bareRate, (await load(round, concurrency, () => call(barePort, 'GET', '/bare'))).perSecond);
      me = Math.max(
        me,
        (await load(round, concurrency, () => call(port, 'GET', '/api/agent/v1/me', bearer))).perSecond,
      );
      mcp = Math.max(mcp, (await load(round, concurrency, mcpCall)).perSecond);
    }
    const exchanges = await load(ctx.seconds, concurrency, () =>
      call(port, 'POST', '/oauth2/token', formHeaders, form),
    );
    return { bare: bareRate, me, mcp, exchanges: exchanges.perSecond };
  } finally {
    await app.close();
    await bare.close();
    await hub.stop();
  }
}
