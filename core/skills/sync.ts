// POST /api/skills/sync: the scanned skills recorded for the tenant that
// syncs (the bound target). A skill whose bytes or manifest changed is taken
// only as a new version; the same version with other bytes is refused.
import { z } from 'zod';
import { sql, type DatabasePool } from '../db/pool.ts';
import { scanSkillsDirectory, type RefusedSkill, type ScannedSkill } from './scan.ts';

export type SyncedSkill = {
  skillId: string;
  name: string;
  version: string | null;
  status: 'created' | 'updated' | 'unchanged';
  treeSha256: string;
};
export type SyncOutcome = { synced: SyncedSkill[]; refused: RefusedSkill[] };

const Existing = z.object({ id: z.string(), version: z.string().nullable(), tree_sha256: z.string() });

export async function syncSkills(
  db: DatabasePool,
  input: { tenantId: string; userId: string; dir: string },
): Promise<SyncOutcome> {
  const scan = await scanSkillsDirectory(input.dir);
  const refused = [...scan.refused];
  const synced: SyncedSkill[] = [];
  await db.transaction(async (tx) => {
    // One sync per tenant at a time, so two syncs never judge versions against each other's half.
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('skills-sync:' || ${input.tenantId}))`);
    for (const skill of scan.skills) {
      const name = skill.manifest.name;
      const existing = await tx.maybeOne(
        sql.type(
          Existing,
        )`select id, version, tree_sha256 from skills where tenant_id = ${input.tenantId} and name = ${name}`,
      );
      if (existing && existing.tree_sha256 === skill.treeSha256) {
        synced.push({
          skillId: existing.id,
          name,
          version: existing.version,
          status: 'unchanged',
          treeSha256: skill.treeSha256,
        });
        continue;
      }
      if (existing && existing.version === skill.manifest.version) {
        refused.push({
          name,
          code: 'changed_without_new_version',
          reason: `the files of version ${existing.version ?? '(none)'} changed; give SKILL.md a new version to sync them`,
        });
        continue;
      }
      const id = existing
        ? await update(tx, existing.id, skill, input.userId)
        : await insert(tx, input.tenantId, skill, input.userId);
      synced.push({
        skillId: id,
        name,
        version: skill.manifest.version,
        status: existing ? 'updated' : 'created',
        treeSha256: skill.treeSha256,
      });
    }
  });
  return { synced, refused: refused.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) };
}

type Tx = Parameters<Parameters<DatabasePool['transaction']>[0]>[0];
const Id = sql.type(z.object({ id: z.string() }));

async function insert(tx: Tx, tenantId: string, s: ScannedSkill, userId: string): Promise<string> {
  const m = s.manifest;
  return tx.oneFirst(Id`
    insert into skills (tenant_id, name, description, version, instructions, manifest, manifest_sha256, tree_sha256, files, total_bytes, allowed_tools, env_schema, synced_by)
    values (${tenantId}, ${m.name}, ${m.description}, ${m.version}, ${m.instructions}, ${sql.jsonb(m.frontMatter as never)}, ${s.manifestSha256},
      ${s.treeSha256}, ${sql.jsonb(s.files)}, ${s.totalBytes}, ${sql.array(m.allowedTools, 'text')}, ${sql.jsonb((m.env ?? []) as never)}, ${userId})
    returning id`);
}

/** A new version: its files and manifest replace the old; an env schema set over the API stays unless the manifest declares one. */
async function update(tx: Tx, id: string, s: ScannedSkill, userId: string): Promise<string> {
  const m = s.manifest;
  return tx.oneFirst(Id`
    update skills set description = ${m.description}, version = ${m.version}, instructions = ${m.instructions},
      manifest = ${sql.jsonb(m.frontMatter as never)}, manifest_sha256 = ${s.manifestSha256}, tree_sha256 = ${s.treeSha256},
      files = ${sql.jsonb(s.files)}, total_bytes = ${s.totalBytes}, allowed_tools = ${sql.array(m.allowedTools, 'text')},
      env_schema = ${m.env ? sql.fragment`${sql.jsonb(m.env as never)}` : sql.fragment`env_schema`},
      synced_by = ${userId}, synced_at = now(), updated_at = now()
    where id = ${id} returning id`);
}
