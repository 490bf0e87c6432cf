// A worker process runs two pools of slots (workers/worker.ts). Jobs that
// mostly wait on the outside world (a model's stream, a channel's API) go to
// the I/O pool, which holds many at once for little CPU; everything else
// (short, CPU-bound or database work) goes to the short pool, sized to the
// cores. A job kind belongs to one pool, and each pool has its own fair order
// (sql/migrations/0037_accounts_fair_order.sql).
export const POOLS = ['short', 'io'] as const;
export type PoolName = (typeof POOLS)[number];

/** Kinds whose time is spent waiting on a model, a channel's API or a partner's. */
export const IO_BOUND_KINDS: ReadonlySet<string> = new Set([
  'chat.turn',
  'company.run',
  'channel.deliver',
  'channel.link',
  'channel.disconnect',
  'partner.token-revocation',
  'diag.wait',
  'team.invitation_email',
]);

export const poolOf = (kind: string): PoolName => (IO_BOUND_KINDS.has(kind) ? 'io' : 'short');

/** Every kind of platform job (a row of `jobs` that clients follow); the rest of the worker's tasks are the platform's own. */
export const PLATFORM_JOB_KINDS: readonly string[] = [
  'agent.restore',
  'billing.webhook',
  'channel.deliver',
  'channel.disconnect',
  'channel.link',
  'chat.turn',
  'company.run',
  'diag.noop',
  'diag.steps',
  'diag.wait',
  'team.invitation_email',
];
