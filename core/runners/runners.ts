// Runners: a tenant's self-hosted executors. Enrollment mints a token shown
// once (stored as SHA-256); the runner authenticates every heartbeat and
// acknowledgement with it. Heartbeats record liveness and whether the runner
// reaches the cloud gateway; they answer with the runner's pending work.
// Admins list and revoke runners (registry.ts); a revoked runner's token no
// longer authenticates and readiness never picks it.
import { z } from 'zod';
import { randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

export const RUNNER_TOKEN_PREFIX = 'rnr_';
/** A runner whose last heartbeat is older than this counts as offline. */
export const RUNNER_OFFLINE_AFTER_S = 60;
/**
 * Whether a `runners` row counts as online: active and seen recently. One
 * definition for readiness and the runner list, so they never disagree.
 */
export const RUNNER_ONLINE = sql.fragment`(status = 'active' and coalesce(last_heartbeat_at > now() - make_interval(secs => ${RUNNER_OFFLINE_AFTER_S}), false))`;

/** The runner was revoked after its token was checked (a revoke racing a request). */
export class RunnerRevokedError extends Error {
  override name = 'RunnerRevokedError';
}

const Id = z.object({ id: z.string() });

export async function enrollRunner(db: CommonQueryMethods, tenantId: string, name: string): Promise<{ runnerId: string; token: string }> {
  const token = randomToken(RUNNER_TOKEN_PREFIX);
  const runnerId = await db.oneFirst(sql.type(Id)`
    insert into runners (tenant_id, name, token_hash) values (${tenantId}, ${name}, ${sha256(token)}) returning id`);
  return { runnerId, token };
}

const RunnerIdentity = z.object({ id: z.string(), tenant_id: z.string() });
export type RunnerIdentity = z.infer<typeof RunnerIdentity>;

/** The active runner holding this token, or null. Lookup by hash: the token never reaches SQL. */
export async function runnerByToken(db: CommonQueryMethods, token: string): Promise<RunnerIdentity | null> {
  if (!token.startsWith(RUNNER_TOKEN_PREFIX)) return null;
  return db.maybeOne(sql.type(RunnerIdentity)`select id, tenant_id from runners where token_hash = ${sha256(token)} and status = 'active'`);
}

export const PendingWorkRow = z.object({
  id: z.string(),
  kind: z.literal('agent.restore'),
  managed_agent_id: z.string(),
  agent_name: z.string(),
  job_id: z.string(),
  created_at: z.string(),
});
export type PendingWorkRow = z.infer<typeof PendingWorkRow>;

/**
 * Records a heartbeat and returns the runner's pending work, oldest first.
 * The update re-checks the status, so a revoke that commits first wins.
 */
export async function heartbeat(db: CommonQueryMethods, runner: RunnerIdentity, gatewayConnected: boolean): Promise<readonly PendingWorkRow[]> {
  const seen = await db.maybeOne(sql.type(Id)`
    update runners set last_heartbeat_at = now(), gateway_connected = ${gatewayConnected}
    where id = ${runner.id} and status = 'active' returning id`);
  if (!seen) throw new RunnerRevokedError('runner revoked');
  return db.any(sql.type(PendingWorkRow)`
    select w.id, 'agent.restore' as kind, w.managed_agent_id, a.name as agent_name, w.job_id, w.created_at
    from runner_work w join managed_agents a on a.id = w.managed_agent_id
    where w.runner_id = ${runner.id} and w.state = 'pending'
    order by w.created_at limit 100`);
}

const WorkState = z.object({ id: z.string(), state: z.enum(['pending', 'acknowledged', 'done']), acknowledged_at: z.string().nullable() });
export type WorkState = z.infer<typeof WorkState>;

/**
 * Acknowledges a piece of the runner's own work. Repeating it is harmless:
 * work already acknowledged or done is returned as it is. Null: no such work
 * for this runner. A runner revoked meanwhile acknowledges nothing.
 */
export async function acknowledgeWork(db: CommonQueryMethods, runner: RunnerIdentity, workId: string): Promise<WorkState | null> {
  const updated = await db.maybeOne(sql.type(WorkState)`
    update runner_work set state = 'acknowledged', acknowledged_at = now()
    where id = ${workId} and runner_id = ${runner.id} and state = 'pending'
      and exists (select 1 from runners where id = ${runner.id} and status = 'active')
    returning id, state, acknowledged_at`);
  if (updated) return updated;
  const active = await db.exists(sql.unsafe`select 1 from runners where id = ${runner.id} and status = 'active'`);
  if (!active) throw new RunnerRevokedError('runner revoked');
  return db.maybeOne(sql.type(WorkState)`select id, state, acknowledged_at from runner_work where id = ${workId} and runner_id = ${runner.id}`);
}

export async function runExecutionEnabled(db: CommonQueryMethods, tenantId: string): Promise<boolean> {
  const enabled = await db.maybeOneFirst(sql.type(z.object({ run_execution_enabled: z.boolean() }))`
    select run_execution_enabled from tenant_agent_settings where tenant_id = ${tenantId}`);
  return enabled ?? true;
}

export async function setRunExecutionEnabled(db: CommonQueryMethods, tenantId: string, enabled: boolean): Promise<void> {
  await db.query(sql.unsafe`
    insert into tenant_agent_settings (tenant_id, run_execution_enabled) values (${tenantId}, ${enabled})
    on conflict (tenant_id) do update set run_execution_enabled = excluded.run_execution_enabled, updated_at = now()`);
}

export type Readiness =
  | { ready: true; runnerId: string }
  | { ready: false; reason: 'runner_not_enrolled' | 'run_execution_disabled' | 'runner_offline' | 'cloud_gateway_not_connected' };

const Candidate = z.object({ id: z.string(), online: z.boolean(), gateway_connected: z.boolean() });

/**
 * Whether the tenant can run agent work now, checked in the order a person
 * would fix it: a runner enrolled, execution switched on, the runner online,
 * its gateway connected. Of several runners the most ready one counts; among
 * equals the one already assigned to the agent, then the most recently seen.
 */
export async function readiness(db: CommonQueryMethods, tenantId: string, preferredRunnerId: string | null): Promise<Readiness> {
  const runner = await db.maybeOne(sql.type(Candidate)`
    select id, ${RUNNER_ONLINE} as online, gateway_connected
    from runners where tenant_id = ${tenantId} and status = 'active'
    order by online desc, gateway_connected desc, (id = ${preferredRunnerId ?? '00000000-0000-0000-0000-000000000000'}) desc,
      last_heartbeat_at desc nulls last, enrolled_at desc
    limit 1`);
  if (!runner) return { ready: false, reason: 'runner_not_enrolled' };
  if (!(await runExecutionEnabled(db, tenantId))) return { ready: false, reason: 'run_execution_disabled' };
  if (!runner.online) return { ready: false, reason: 'runner_offline' };
  if (!runner.gateway_connected) return { ready: false, reason: 'cloud_gateway_not_connected' };
  return { ready: true, runnerId: runner.id };
}
