// Callers of every kind the OpenAPI document's security schemes name, for
// generated tests: tenant Admin, Member and Viewer (platform JWT), operator, agent
// access token with every scope, runner token, dashboard license token.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { signDashboardToken } from '../../core/auth/dashboard-token.ts';
import { signPlatformToken } from '../../core/auth/platform-token.ts';
import type { Config } from '../../core/config.ts';
import { createLicense } from '../../core/dashboard/licenses.ts';
import { sql, type DatabasePool } from '../../core/db/pool.ts';
import { createRegistration } from '../../core/identity/registrations.ts';
import { AGENT_SCOPES, resources, signAccessToken, type AccessClaims } from '../../core/identity/tokens.ts';
import { TEST_SECRET } from './config.ts';
import { markClaimed } from './fixtures.ts';

export const PURCHASE_WEBHOOK_SECRET = 'purchase-webhook-secret-for-tests';

export type Person = { userId: string; token: string };
export type Workspace = {
  tenantId: string;
  admin: Person;
  member: Person;
  viewer: Person;
  /** Agent API bearer token (all scopes) of an agent principal acting in this tenant. */
  agent: { token: string; principalId: string; registrationId: string };
  runner: { token: string; runnerId: string };
  dashboard: { token: string; licenseId: string };
};

async function person(db: DatabasePool, config: Config, extra: { operator?: boolean } = {}): Promise<Person> {
  const userId = randomUUID();
  await db.query(
    sql.unsafe`insert into users (id, email, is_operator) values (${userId}, ${`${userId}@example.test`}, ${extra.operator ?? false})`,
  );
  return { userId, token: await signPlatformToken({ userId }, Buffer.from(TEST_SECRET, 'base64'), config.baseUrl) };
}

/** An operator of the platform (not a member of any tenant). */
export const createOperator = (db: DatabasePool, config: Config) => person(db, config, { operator: true });

/** An Agent API access token for a registration's agent with these scopes (5 minutes, as the token endpoint gives). */
export function agentAccessToken(
  app: FastifyInstance,
  config: Config,
  registration: { id: string; principal_id: string; tenant_id: string },
  scopes: AccessClaims['scopes'],
  ttlS = 300,
): Promise<string> {
  const claims = {
    principalId: registration.principal_id,
    registrationId: registration.id,
    tenantId: registration.tenant_id,
  };
  return signAccessToken(app.idpKeys, config.authUrl, resources(config.baseUrl).agent, { ...claims, scopes }, ttlS);
}

/**
 * A tenant as an agent registration makes it (claimed, so every scope), with
 * a person as Admin, another as Viewer, an enrolled runner and a dashboard license.
 */
export async function createWorkspace(app: FastifyInstance, db: DatabasePool, config: Config): Promise<Workspace> {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.1', claimTokenTtlS: 600 });
  await markClaimed(db, registration.id);
  const tenantId = registration.tenant_id;
  const agentToken = await agentAccessToken(app, config, registration, [...AGENT_SCOPES], 3600);
  const admin = await person(db, config);
  const member = await person(db, config);
  const viewer = await person(db, config);
  await db.query(sql.unsafe`
    insert into tenant_memberships (tenant_id, user_id, role)
    values (${tenantId}, ${admin.userId}, 'admin'), (${tenantId}, ${member.userId}, 'member'), (${tenantId}, ${viewer.userId}, 'viewer')`);
  const enrolled = await app.inject({
    method: 'POST',
    url: '/api/runners/enroll',
    headers: { authorization: `Bearer ${admin.token}`, 'x-tenant-id': tenantId },
    payload: { name: 'fixture runner' },
  });
  if (enrolled.statusCode !== 201 && enrolled.statusCode !== 200)
    throw new Error(`runner enroll: ${enrolled.statusCode} ${enrolled.body}`);
  const license = await createLicense(db, { purchaserEmail: `${admin.userId}@example.test` });
  const dashboardToken = await signDashboardToken(
    { licenseId: license.id },
    Buffer.from(TEST_SECRET, 'base64'),
    config.baseUrl,
  );
  return {
    tenantId,
    admin,
    member,
    viewer,
    agent: { token: agentToken, principalId: registration.principal_id, registrationId: registration.id },
    runner: { token: enrolled.json().token, runnerId: enrolled.json().runnerId },
    dashboard: { token: dashboardToken, licenseId: license.id },
  };
}

/**
 * An agent claimed by `person` into the workspace (its organization), as the
 * claim page leaves it: it acts in `w` with the person's role there. Its
 * token has every scope; `resource` is the Agent API's unless said.
 */
export async function agentClaimedBy(
  app: FastifyInstance,
  db: DatabasePool,
  config: Config,
  w: Workspace,
  person: Person,
  resource = resources(config.baseUrl).agent,
): Promise<{ token: string; principalId: string; registrationId: string }> {
  const { registration } = await createRegistration(db, { type: 'anonymous', ip: '10.9.0.2', claimTokenTtlS: 600 });
  await db.query(sql.unsafe`
    update agent_registrations set claim_state = 'claimed', claimed_by = ${person.userId}, claimed_at = now(),
      organization_id = ${w.tenantId}
    where id = ${registration.id}`);
  const claims = { principalId: registration.principal_id, registrationId: registration.id, tenantId: w.tenantId };
  const token = await signAccessToken(
    app.idpKeys,
    config.authUrl,
    resource,
    { ...claims, scopes: [...AGENT_SCOPES] },
    3600,
  );
  return { token, principalId: registration.principal_id, registrationId: registration.id };
}

/** The authorization header an operation's first security scheme needs, as `who` (Admin by default). */
export function authFor(security: string[], w: Workspace, who: Person = w.admin): Record<string, string> {
  const scheme = security[0];
  if (scheme === 'PlatformJWT') return { authorization: `Bearer ${who.token}` };
  if (scheme === 'AgentBearer') return { authorization: `Bearer ${w.agent.token}` };
  if (scheme === 'RunnerToken') return { authorization: `Bearer ${w.runner.token}` };
  if (scheme === 'DashboardJWT') return { authorization: `Bearer ${w.dashboard.token}` };
  if (scheme === 'PurchaseWebhookBearer') return { authorization: `Bearer ${PURCHASE_WEBHOOK_SECRET}` };
  return {};
}
