// Plans allow models by exact id (`provider/model`) or by `provider/*`.
import type { Plan } from '../plans.ts';
import { parseModel } from '../providers/registry.ts';

export function modelAllowed(plan: Plan, modelId: string): boolean {
  const parsed = parseModel(modelId);
  if (!parsed) return false;
  return plan.models.some((allowed) => allowed === modelId || allowed === `${parsed.provider}/*`);
}
