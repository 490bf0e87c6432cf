import { z } from 'zod';
import { ENV_FIELD_TYPES, EnvField, EnvSchema } from '../../../core/skills/env-schema.ts';
import type { SkillRow } from '../../../core/skills/skills.ts';

export const SkillParams = z.object({ skillId: z.uuid() });

export const Skill = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    version: z.string().nullable(),
    allowedTools: z.array(z.string()).describe('Tools the skill declares (allowed-tools of SKILL.md)'),
    published: z.boolean(),
    publishedAt: z.iso.datetime().nullable(),
    envSchema: z.array(EnvField),
    fileCount: z.int(),
    totalBytes: z.int(),
    syncedAt: z.iso.datetime(),
  })
  .meta({ id: 'Skill' });

export const SkillDetail = Skill.extend({
  manifestSha256: z.string().describe('SHA-256 of SKILL.md'),
  treeSha256: z.string().describe('SHA-256 over every file path, SHA-256 and size'),
  files: z.array(z.object({ path: z.string(), sha256: z.string(), bytes: z.int() })),
}).meta({ id: 'SkillDetail' });

export const SkillFieldState = z
  .object({
    name: z.string(),
    type: z.enum(ENV_FIELD_TYPES),
    required: z.boolean(),
    secret: z.boolean(),
    source: z.enum(['set', 'default', 'unset']),
    value: z.union([z.string(), z.number(), z.boolean()]).optional().describe('Plain fields only'),
    masked: z
      .string()
      .optional()
      .describe('Secret fields: never the value; the last four characters of values of 8 or more'),
  })
  .meta({ id: 'SkillFieldState' });

export const SkillConfig = z
  .object({
    skillId: z.uuid(),
    configured: z.boolean().describe('Every required field has a value (turns use only configured skills)'),
    missing: z.array(z.string()),
    fields: z.array(SkillFieldState),
    updatedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'SkillConfig' });

export const InstalledSkill = Skill.extend({ configuration: SkillConfig }).meta({ id: 'InstalledSkill' });

export const SyncResult = z
  .object({
    directory: z.string().describe('The skills directory that was read'),
    synced: z.array(
      z.object({
        skillId: z.uuid(),
        name: z.string(),
        version: z.string().nullable(),
        status: z.enum(['created', 'updated', 'unchanged']),
        treeSha256: z.string(),
      }),
    ),
    refused: z
      .array(z.object({ name: z.string(), code: z.string(), reason: z.string() }))
      .describe('Skills not synced, by name, with why; the others still sync'),
  })
  .meta({ id: 'SkillSyncResult' });

export const EnvSchemaBody = z.object({ fields: EnvSchema }).strict();
export const ConfigureBody = z
  .object({
    values: z
      .record(z.string().max(64), z.union([z.string(), z.number(), z.boolean()]))
      .describe('Field name -> value; fields left out keep their stored value'),
  })
  .strict();

export const toSkill = (s: SkillRow) => ({
  id: s.id,
  name: s.name,
  description: s.description,
  version: s.version,
  allowedTools: s.allowed_tools,
  published: s.published,
  publishedAt: s.published_at,
  envSchema: s.env_schema,
  fileCount: s.files.length,
  totalBytes: s.total_bytes,
  syncedAt: s.synced_at,
});
export const toSkillDetail = (s: SkillRow) => ({
  ...toSkill(s),
  manifestSha256: s.manifest_sha256,
  treeSha256: s.tree_sha256,
  files: s.files,
});
