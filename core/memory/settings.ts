// A tenant's memory settings: whether turns see memory, how long files live,
// and the limits on files. No row means the defaults below.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

/** Hard bounds of the settings (the table checks them too). */
export const MEMORY_BOUNDS = {
  retentionDays: { min: 1, max: 3650 },
  maxFiles: { min: 1, max: 1000 },
  maxFileBytes: { min: 1, max: 262_144 },
  maxTotalBytes: { min: 1, max: 8_388_608 },
} as const;

export const MEMORY_DEFAULTS = {
  enabled: true,
  retentionDays: 90,
  maxFiles: 50,
  maxFileBytes: 65_536,
  maxTotalBytes: 1_048_576,
} as const;

export type MemorySettings = {
  enabled: boolean;
  retentionDays: number;
  maxFiles: number;
  maxFileBytes: number;
  maxTotalBytes: number;
  updatedAt: string | null;
};

const Row = z.object({
  enabled: z.boolean(),
  retention_days: z.number(),
  max_files: z.number(),
  max_file_bytes: z.number(),
  max_total_bytes: z.number(),
  updated_at: z.string(),
});
const toSettings = (r: z.infer<typeof Row>): MemorySettings => ({
  enabled: r.enabled,
  retentionDays: r.retention_days,
  maxFiles: r.max_files,
  maxFileBytes: r.max_file_bytes,
  maxTotalBytes: r.max_total_bytes,
  updatedAt: r.updated_at,
});

export async function getMemorySettings(db: CommonQueryMethods, tenantId: string): Promise<MemorySettings> {
  const row = await db.maybeOne(sql.type(Row)`
    select enabled, retention_days, max_files, max_file_bytes, max_total_bytes, updated_at from memory_settings where tenant_id = ${tenantId}`);
  return row ? toSettings(row) : { ...MEMORY_DEFAULTS, updatedAt: null };
}

export class InvalidMemorySettingsError extends Error {
  override name = 'InvalidMemorySettingsError';
}

/** Merges a partial change into the current settings and stores the whole row. */
export async function saveMemorySettings(
  db: CommonQueryMethods,
  tenantId: string,
  userId: string,
  change: Partial<Omit<MemorySettings, 'updatedAt'>>,
): Promise<MemorySettings> {
  const current = await getMemorySettings(db, tenantId);
  const next = {
    ...current,
    ...Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined)),
  } as MemorySettings;
  if (next.maxFileBytes > next.maxTotalBytes)
    throw new InvalidMemorySettingsError('maxFileBytes cannot exceed maxTotalBytes.');
  const row = await db.one(sql.type(Row)`
    insert into memory_settings (tenant_id, enabled, retention_days, max_files, max_file_bytes, max_total_bytes, updated_by)
    values (${tenantId}, ${next.enabled}, ${next.retentionDays}, ${next.maxFiles}, ${next.maxFileBytes}, ${next.maxTotalBytes}, ${userId})
    on conflict (tenant_id) do update set enabled = excluded.enabled, retention_days = excluded.retention_days,
      max_files = excluded.max_files, max_file_bytes = excluded.max_file_bytes, max_total_bytes = excluded.max_total_bytes,
      updated_by = excluded.updated_by, updated_at = now()
    returning enabled, retention_days, max_files, max_file_bytes, max_total_bytes, updated_at`);
  return toSettings(row);
}
