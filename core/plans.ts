// Plans and what they include. Quotas are counted by the usage area; the
// numbers here are the limits a plan grants.
export type PlanName = 'free' | 'pro' | 'enterprise';

export type Plan = {
  name: PlanName;
  /** Company views, tasks and runs (the Agent API answers 402 plan_required without it). */
  companyWork: boolean;
  monthlyMessages: number;
  models: readonly string[];
  /** Agents (company agents and managed agents) the plan includes; add-on slots come on top. */
  agentSlots: number;
};

/** The built-in model works offline, with no provider key, so a new workspace can chat at once. */
export const OFFLINE_MODEL = 'builtin/offline';

export const PLANS: Record<PlanName, Plan> = {
  free: { name: 'free', companyWork: false, monthlyMessages: 200, models: [OFFLINE_MODEL], agentSlots: 3 },
  pro: {
    name: 'pro',
    companyWork: true,
    monthlyMessages: 10_000,
    models: [OFFLINE_MODEL, 'openai/*', 'anthropic/*'],
    agentSlots: 10,
  },
  enterprise: {
    name: 'enterprise',
    companyWork: true,
    monthlyMessages: 100_000,
    models: [OFFLINE_MODEL, 'openai/*', 'anthropic/*', 'custom/*'],
    agentSlots: 50,
  },
};

export const planOf = (name: string): Plan => PLANS[name as PlanName] ?? PLANS.free;

export const PLAN_NAMES = Object.keys(PLANS) as [PlanName, ...PlanName[]];
/** Order of plans: a higher rank includes everything a lower one does. */
export const planRank = (name: PlanName): number => PLAN_NAMES.indexOf(name);
