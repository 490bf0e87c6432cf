// A tenant's configuration of a skill, checked against its env schema.
// Secret values are sealed (AES-256-GCM, bound to tenant, skill and field)
// and only ever shown masked; they never reach logs, answers or the model.
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { checkValues, type EnvField, type EnvValue, type ValueIssue } from './env-schema.ts';
import { findSkill } from './skills.ts';

const Sealed = z.object({ keyId: z.string(), ciphertext: z.string(), last4: z.string() });
const ConfigRow = z.object({
  values_json: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  secrets: z.record(z.string(), Sealed),
  updated_at: z.string(),
});

export type FieldState = {
  name: string;
  type: EnvField['type'];
  required: boolean;
  secret: boolean;
  source: 'set' | 'default' | 'unset';
  value?: EnvValue;
  masked?: string;
};
export type SkillConfigView = {
  skillId: string;
  configured: boolean;
  missing: string[];
  fields: FieldState[];
  updatedAt: string | null;
};

export const maskSecret = (last4: string) => `••••••••${last4}`;
const aad = (tenantId: string, skillId: string, field: string) => `skill-config:${tenantId}:${skillId}:${field}`;

export class SkillConfigInvalidError extends Error {
  override name = 'SkillConfigInvalidError';
  constructor(readonly issues: ValueIssue[]) {
    super(issues.map((i) => `${i.path}: ${i.message}`).join('; '));
  }
}

async function readConfig(db: CommonQueryMethods, tenantId: string, skillId: string) {
  return db.maybeOne(
    sql.type(
      ConfigRow,
    )`select values_json, secrets, updated_at from skill_configs where tenant_id = ${tenantId} and skill_id = ${skillId}`,
  );
}

export function configView(
  skillId: string,
  schema: readonly EnvField[],
  row: z.infer<typeof ConfigRow> | null,
): SkillConfigView {
  const fields = schema.map((f): FieldState => {
    const base = { name: f.name, type: f.type, required: f.required, secret: f.secret };
    const sealed = row?.secrets[f.name];
    if (f.secret)
      return sealed ? { ...base, source: 'set', masked: maskSecret(sealed.last4) } : { ...base, source: 'unset' };
    const value = row?.values_json[f.name];
    if (value !== undefined) return { ...base, source: 'set', value };
    return f.default !== undefined ? { ...base, source: 'default', value: f.default } : { ...base, source: 'unset' };
  });
  const missing = fields.filter((f) => f.required && f.source === 'unset').map((f) => f.name);
  return { skillId, configured: missing.length === 0, missing, fields, updatedAt: row?.updated_at ?? null };
}

export async function getSkillConfig(
  db: CommonQueryMethods,
  tenantId: string,
  skillId: string,
): Promise<SkillConfigView | null> {
  const skill = await findSkill(db, tenantId, skillId);
  if (!skill) return null;
  return configView(skillId, skill.env_schema, await readConfig(db, tenantId, skillId));
}

/**
 * Sets the given values (others keep what is stored); the result must fill
 * every required field. Refused as a whole, with nothing written, otherwise.
 */
export async function configureSkill(
  db: DatabasePool,
  keyring: Keyring,
  input: { tenantId: string; skillId: string; userId: string; values: Record<string, EnvValue> },
): Promise<SkillConfigView | null> {
  return db.transaction(async (tx) => {
    // Locked, so a concurrent env-schema change cannot slip between the check and the write.
    await tx.query(
      sql.unsafe`select 1 from skills where id = ${input.skillId} and tenant_id = ${input.tenantId} for update`,
    );
    const skill = await findSkill(tx, input.tenantId, input.skillId);
    if (!skill) return null;
    const schema = skill.env_schema;
    const stored = await readConfig(tx, input.tenantId, input.skillId);
    // The given values must fit their fields; together with what is stored they must fill every required one.
    const given = checkValues(schema, input.values).filter((i) => i.message !== 'required');
    const has = new Set([
      ...Object.keys(stored?.values_json ?? {}),
      ...Object.keys(stored?.secrets ?? {}),
      ...Object.keys(input.values),
    ]);
    const missing = schema
      .filter((f) => f.required && f.default === undefined && !has.has(f.name))
      .map((f) => ({ path: `body.values.${f.name}`, message: 'required' }));
    if (given.length + missing.length > 0) throw new SkillConfigInvalidError([...given, ...missing]);
    const values = { ...(stored?.values_json ?? {}) };
    const secrets = { ...(stored?.secrets ?? {}) };
    for (const [name, value] of Object.entries(input.values)) {
      const field = schema.find((f) => f.name === name)!;
      if (field.secret) {
        const text = String(value);
        const sealed = keyring.seal(text, aad(input.tenantId, input.skillId, name));
        secrets[name] = { ...sealed, last4: text.length >= 8 ? text.slice(-4) : '' };
      } else values[name] = value;
    }
    const row = await tx.one(sql.type(ConfigRow)`
      insert into skill_configs (tenant_id, skill_id, values_json, secrets, updated_by)
      values (${input.tenantId}, ${input.skillId}, ${sql.jsonb(values)}, ${sql.jsonb(secrets)}, ${input.userId})
      on conflict (tenant_id, skill_id) do update set values_json = excluded.values_json, secrets = excluded.secrets,
        updated_by = excluded.updated_by, updated_at = now()
      returning values_json, secrets, updated_at`);
    return configView(input.skillId, schema, row);
  });
}

/** Back to the defaults: every stored value and secret removed. */
export async function resetSkillConfig(
  db: CommonQueryMethods,
  tenantId: string,
  skillId: string,
): Promise<SkillConfigView | null> {
  const skill = await findSkill(db, tenantId, skillId);
  if (!skill) return null;
  await db.query(sql.unsafe`delete from skill_configs where tenant_id = ${tenantId} and skill_id = ${skillId}`);
  return configView(skillId, skill.env_schema, null);
}

/** The opened secret values of a skill, for the code that runs it (never for answers or prompts). */
export async function openSkillSecrets(
  db: CommonQueryMethods,
  keyring: Keyring,
  tenantId: string,
  skillId: string,
): Promise<Record<string, string>> {
  const row = await readConfig(db, tenantId, skillId);
  return Object.fromEntries(
    Object.entries(row?.secrets ?? {}).map(([name, s]) => [
      name,
      keyring.open(s.keyId, s.ciphertext, aad(tenantId, skillId, name)),
    ]),
  );
}
