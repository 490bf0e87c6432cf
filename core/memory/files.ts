// Memory files of a tenant: named UTF-8 texts the agent sees in its turns.
// Writes check the tenant's limits under a per-tenant lock, so two racing
// writes can never pass the total together.
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';
import { getMemorySettings } from './settings.ts';

export const MAX_FILENAME_LENGTH = 100;
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** A file name, never a path: letters, digits, '.', '_', '-', no '..', at most 100 characters. */
export const isSafeFilename = (name: string) => SAFE_NAME.test(name) && !name.includes('..');

export const MemoryFileRow = z.object({
  id: z.string(),
  name: z.string(),
  bytes: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type MemoryFileRow = z.infer<typeof MemoryFileRow>;
const META = sql.fragment`id, name, bytes, created_at, updated_at`;

export class MemoryLimitError extends Error {
  override name = 'MemoryLimitError';
  constructor(
    readonly status: 400 | 413,
    readonly code: 'memory_file_too_large' | 'memory_total_too_large' | 'memory_too_many_files',
    message: string,
  ) {
    super(message);
  }
}

export async function listMemoryFiles(db: CommonQueryMethods, tenantId: string): Promise<readonly MemoryFileRow[]> {
  return db.any(sql.type(MemoryFileRow)`select ${META} from memory_files where tenant_id = ${tenantId} order by name`);
}

export async function readMemoryFile(db: CommonQueryMethods, tenantId: string, name: string) {
  return db.maybeOne(sql.type(MemoryFileRow.extend({ content: z.string() }))`
    select ${META}, content from memory_files where tenant_id = ${tenantId} and name = ${name}`);
}

export async function deleteMemoryFile(db: CommonQueryMethods, tenantId: string, name: string): Promise<boolean> {
  const gone = await db.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
    delete from memory_files where tenant_id = ${tenantId} and name = ${name} returning id`);
  return gone !== null;
}

/** Appends to or replaces a named file; refused (nothing written) past a limit. */
export async function writeMemoryFile(
  db: DatabasePool,
  input: { tenantId: string; userId: string; name: string; content: string; mode: 'append' | 'replace' },
): Promise<MemoryFileRow & { content: string }> {
  return db.transaction(async (tx) => {
    await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('memory:' || ${input.tenantId}))`);
    const settings = await getMemorySettings(tx, input.tenantId);
    const usage = await tx.one(sql.type(
      z.object({ files: z.number(), total: z.number(), own: z.number().nullable(), content: z.string().nullable() }),
    )`
      select count(*)::int as files, coalesce(sum(bytes), 0)::int as total,
        max(bytes) filter (where name = ${input.name}) as own,
        max(content) filter (where name = ${input.name}) as content
      from memory_files where tenant_id = ${input.tenantId}`);
    const content = input.mode === 'append' && usage.content !== null ? usage.content + input.content : input.content;
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes > settings.maxFileBytes) {
      throw new MemoryLimitError(
        413,
        'memory_file_too_large',
        `A memory file may hold ${settings.maxFileBytes} bytes; this one would hold ${bytes}.`,
      );
    }
    if (usage.own === null && usage.files >= settings.maxFiles) {
      throw new MemoryLimitError(
        400,
        'memory_too_many_files',
        `The workspace may keep ${settings.maxFiles} memory files; delete one first.`,
      );
    }
    const total = usage.total - (usage.own ?? 0) + bytes;
    if (total > settings.maxTotalBytes) {
      throw new MemoryLimitError(
        413,
        'memory_total_too_large',
        `Memory may hold ${settings.maxTotalBytes} bytes in all; this write would make ${total}.`,
      );
    }
    return tx.one(sql.type(MemoryFileRow.extend({ content: z.string() }))`
      insert into memory_files (tenant_id, name, content, bytes, created_by)
      values (${input.tenantId}, ${input.name}, ${content}, ${bytes}, ${input.userId})
      on conflict (tenant_id, name) do update set content = excluded.content, bytes = excluded.bytes, updated_at = now()
      returning ${META}, content`);
  });
}

/** Deletes files not written for longer than their tenant's retention (default when unset). */
export async function deleteExpiredMemoryFiles(db: CommonQueryMethods, defaultRetentionDays: number): Promise<number> {
  const rows = await db.any(sql.type(z.object({ id: z.string() }))`
    delete from memory_files f
    where f.updated_at < now() - interval '1 day' -- the shortest retention; lets the index narrow the scan
      and f.updated_at < now() - make_interval(days => coalesce(
      (select s.retention_days from memory_settings s where s.tenant_id = f.tenant_id), ${defaultRetentionDays}))
    returning f.id`);
  return rows.length;
}
