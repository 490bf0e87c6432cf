// Reading and managing a tenant's skills: catalog (published), all, publish,
// unpublish, env schema. Another tenant's skill reads as absent.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { EnvField, type EnvSchema } from './env-schema.ts';

export const SkillRow = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  version: z.string().nullable(),
  allowed_tools: z.array(z.string()),
  env_schema: z.array(EnvField),
  published: z.boolean(),
  published_at: z.string().nullable(),
  manifest_sha256: z.string(),
  tree_sha256: z.string(),
  files: z.array(z.object({ path: z.string(), sha256: z.string(), bytes: z.number() })),
  total_bytes: z.number(),
  synced_at: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type SkillRow = z.infer<typeof SkillRow>;
const COLUMNS = sql.fragment`id, name, description, version, allowed_tools, env_schema, published, published_at, manifest_sha256, tree_sha256, files, total_bytes, synced_at, created_at, updated_at`;

export async function listSkills(
  db: CommonQueryMethods,
  tenantId: string,
  only: 'published' | 'all',
): Promise<readonly SkillRow[]> {
  return db.any(sql.type(SkillRow)`
    select ${COLUMNS} from skills where tenant_id = ${tenantId} ${only === 'published' ? sql.fragment`and published` : sql.fragment``}
    order by name`);
}

export async function findSkill(db: CommonQueryMethods, tenantId: string, skillId: string): Promise<SkillRow | null> {
  return db.maybeOne(
    sql.type(SkillRow)`select ${COLUMNS} from skills where id = ${skillId} and tenant_id = ${tenantId}`,
  );
}

export async function setPublished(
  db: CommonQueryMethods,
  tenantId: string,
  skillId: string,
  published: boolean,
): Promise<SkillRow | null> {
  return db.maybeOne(sql.type(SkillRow)`
    update skills set published = ${published}, published_at = ${published ? sql.fragment`coalesce(published_at, now())` : sql.fragment`null`}, updated_at = now()
    where id = ${skillId} and tenant_id = ${tenantId} returning ${COLUMNS}`);
}

/**
 * Replaces the env schema; stored values of fields that vanished or changed
 * type or secrecy are dropped in the same transaction (a plain value never
 * becomes a secret one, nor the reverse).
 */
export async function setEnvSchema(
  db: DatabasePool,
  tenantId: string,
  skillId: string,
  schema: EnvSchema,
): Promise<SkillRow | null> {
  return db.transaction(async (tx) => {
    const before = await tx.maybeOne(sql.type(z.object({ env_schema: z.array(EnvField) }))`
      select env_schema from skills where id = ${skillId} and tenant_id = ${tenantId} for update`);
    if (!before) return null;
    const old = new Map(before.env_schema.map((f) => [f.name, f]));
    const keep = schema.filter((f) => old.get(f.name)?.type === f.type && old.get(f.name)?.secret === f.secret);
    const plain = keep.filter((f) => !f.secret).map((f) => f.name);
    const secret = keep.filter((f) => f.secret).map((f) => f.name);
    await tx.query(sql.unsafe`
      update skill_configs set
        values_json = (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(values_json) where key = any(${sql.array(plain, 'text')})),
        secrets = (select coalesce(jsonb_object_agg(key, value), '{}') from jsonb_each(secrets) where key = any(${sql.array(secret, 'text')})),
        updated_at = now()
      where skill_id = ${skillId} and tenant_id = ${tenantId}`);
    return tx.one(sql.type(SkillRow)`
      update skills set env_schema = ${sql.jsonb(schema as never)}, updated_at = now() where id = ${skillId} returning ${COLUMNS}`);
  });
}
