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

export async function enrollRunner(
  db: CommonQueryMethods,
  tenantId: string,
  name: string,
): Promise<{ runnerId: string; token: string }> {
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
  return db.maybeOne(
    sql.type(
      RunnerIdentity,
    )`select id, tenant_id from runners where token_hash = ${sha256(token)} and status = 'active'`,
  );
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
export async function heartbeat(
  db: CommonQueryMethods,
  runner: RunnerIdentity,
  gatewayConnected: boolean,
): Promise<readonly PendingWorkRow[]> {
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

const WorkState = z.object({
  id: z.string(),
  state: z.enum(['pending', 'acknowledged', 'done']),
  acknowledged_at: z.string().nullable(),
});
export type WorkState = z.infer<typeof WorkState>;

/**
 * Acknowledges a piece of the runner's own work. Repeating it is harmless:
 * work already acknowledged or done is returned as it is. Null: no such work
 * for this runner. A runner revoked meanwhile acknowledges nothing.
 */
export async function acknowledgeWork(
  db: CommonQueryMethods,
  runner: RunnerIdentity,
  workId: string,
): Promise<WorkState | null> {
  const updated = await db.maybeOne(sql.type(WorkState)`
    update runner_work set state = 'acknowledged', acknowledged_at = now()
    where id = ${workId} and runner_id = ${runner.id} and state = 'pending'
      and exists (select 1 from runners where id = ${runner.id} and status = 'active')
    returning id, state, acknowledged_at`);
  if (updated) return updated;
  const active = await db.exists(sql.unsafe`select 1 from runners where id = ${runner.id} and status = 'active'`);
  if (!active) throw new RunnerRevokedError('runner revoked');
  return db.maybeOne(
    sql.type(
      WorkState,
    )`select id, state, acknowledged_at from runner_work where id = ${workId} and runner_id = ${runner.id}`,
  );
}

export async function runExecutionEnabled(db: CommonQueryMethods, tenantId: string): Promise<boolean> {
  const enabled = await db.maybeOneFirst(sql.type(z.object({ run_execution_enabled: z.boolean() }))`
    select run_execution_enabled from tenant_agent_settings where tenant_id = ${tenantId}`);
  return enabled ?? true;
}

export async function setRunExecutionEnabled(
  db: CommonQueryMethods,
  tenantId: string,
  enabled: boolean,
): Promise<void> {
  await db.query(sql.unsafe`
    insert into tenant_agent_settings (tenant_id, run_execution_enabled) values (${tenantId}, ${enabled})
    on conflict (tenant_id) do update set run_execution_enabled = excluded.run_execution_enabled, updated_at = now()`);
}

export type NotReadyReason =
  | 'runner_not_enrolled'
  | 'run_execution_disabled'
  | 'runner_offline'
  | 'cloud_gateway_not_connected';
export type Readiness = { ready: true; runnerId: string } | { ready: false; reason: NotReadyReason };

/** The facts readiness is decided from, as one row (see readinessFacts). */
export const ReadinessFacts = z.object({
  runner_id: z.string().nullable(),
  online: z.boolean(),
  gateway_connected: z.boolean(),
  run_execution_enabled: z.boolean(),
});
export type ReadinessFacts = z.infer<typeof ReadinessFacts>;

/**
 * One row of readiness facts: the tenant's most ready active runner (none:
 * runner_id null) and whether run execution is on. Of several runners the
 * most ready one counts; among equals the one already assigned to the agent,
 * then the most recently seen. A query of its own (readiness) or a subquery
 * of a larger read (the Agent API capabilities), so both decide alike.
 */
export function readinessFacts(tenantId: string, preferredRunnerId: string | null) {
  return sql.fragment`
    select r.id as runner_id, coalesce(r.online, false) as online, coalesce(r.gateway_connected, false) as gateway_connected,
      coalesce((select s.run_execution_enabled from tenant_agent_settings s where s.tenant_id = ${tenantId}), true) as run_execution_enabled
    from (select 1) as one
    left join lateral (
      select id, ${RUNNER_ONLINE} as online, gateway_connected
      from runners where tenant_id = ${tenantId} and status = 'active'
      order by online desc, gateway_connected desc, (id = ${preferredRunnerId ?? '00000000-0000-0000-0000-000000000000'}) desc,
        last_heartbeat_at desc nulls last, enrolled_at desc
      limit 1
    ) r on true`;
}

/**
 * What is still missing, in the order a person would fix it: a runner
 * enrolled, execution switched on, the runner online, its gateway connected
 * (the last two only mean something once a runner is enrolled).
 */
export function pendingSteps(f: ReadinessFacts): NotReadyReason[] {
  const steps: NotReadyReason[] = [];
  if (!f.runner_id) steps.push('runner_not_enrolled');
  if (!f.run_execution_enabled) steps.push('run_execution_disabled');
  if (f.runner_id && !f.online) steps.push('runner_offline');
  if (f.runner_id && !f.gateway_connected) steps.push('cloud_gateway_not_connected');
  return steps;
}

/** Ready, or the first missing step: what restore answers and capabilities report. */
export function readinessOf(f: ReadinessFacts): Readiness {
  const first = pendingSteps(f)[0];
  if (first) return { ready: false, reason: first };
  return { ready: true, runnerId: f.runner_id! };
}

/** Whether the tenant can run agent work now (one statement). */
export async function readiness(
  db: CommonQueryMethods,
  tenantId: string,
  preferredRunnerId: string | null,
): Promise<Readiness> {
  return readinessOf(await db.one(sql.type(ReadinessFacts)`${readinessFacts(tenantId, preferredRunnerId)}`));
}
