// The skills a turn gives the model: the tenant's published skills whose
// required configuration is complete, each with its name, description and
// the instructions of its SKILL.md, within the budgets below. Configuration
// values (secret or not) never reach the model.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { EnvField } from './env-schema.ts';

/** Characters of one skill's instructions a turn carries (the rest is cut, and the cut is said). */
export const SKILL_INSTRUCTIONS_BUDGET = 4_000;
/** Characters of all skills together. */
export const SKILLS_PROMPT_BUDGET = 12_000;
export const SKILLS_HEADING = '## Skills';

export type SkillsContext = { text: string; skills: string[]; truncated: boolean };

const Row = z.object({
  name: z.string(),
  description: z.string(),
  version: z.string().nullable(),
  instructions: z.string(),
  env_schema: z.array(EnvField),
  configured: z.array(z.string()),
});

export async function skillsContext(db: CommonQueryMethods, tenantId: string): Promise<SkillsContext> {
  const rows = await db.any(sql.type(Row)`
    select s.name, s.description, s.version, left(s.instructions, ${SKILL_INSTRUCTIONS_BUDGET + 1}) as instructions, s.env_schema,
      array(select jsonb_object_keys(coalesce(c.values_json, '{}') || coalesce(c.secrets, '{}'))) as configured
    from skills s left join skill_configs c on c.skill_id = s.id and c.tenant_id = s.tenant_id
    where s.tenant_id = ${tenantId} and s.published order by s.name`);
  const usable = rows.filter((r) =>
    r.env_schema.every((f) => !f.required || f.default !== undefined || r.configured.includes(f.name)),
  );
  if (usable.length === 0) return { text: '', skills: [], truncated: false };
  let text = `${SKILLS_HEADING}\nInstalled skills you can use (follow a skill's instructions when the task fits it):`;
  const skills: string[] = [];
  let truncated = false;
  for (const s of usable) {
    const cut = s.instructions.length > SKILL_INSTRUCTIONS_BUDGET;
    const body = cut
      ? `${s.instructions.slice(0, SKILL_INSTRUCTIONS_BUDGET)}\n[instructions cut to fit the budget]`
      : s.instructions;
    const block = `\n\n### ${s.name}${s.version ? ` (version ${s.version})` : ''}\n${s.description}\n\n${body.trim()}`;
    if (text.length + block.length > SKILLS_PROMPT_BUDGET) {
      text += `\n\n[${usable.length - skills.length} more skills left out to fit the budget]`;
      truncated = true;
      break;
    }
    text += block;
    truncated ||= cut;
    skills.push(s.name);
  }
  return { text, skills, truncated };
}
