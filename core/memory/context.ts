// The memory text a turn gives the model: the tenant's memory files in name
// order, within MEMORY_PROMPT_BUDGET characters (later files are cut and the
// cut is said). Nothing when memory is disabled or empty.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { MEMORY_DEFAULTS } from './settings.ts';

/** Characters of memory text one turn may carry. */
export const MEMORY_PROMPT_BUDGET = 8_000;

export const MEMORY_HEADING = '## Memory';

export type MemoryContext = { enabled: boolean; text: string; files: string[]; truncated: boolean };

const FileRow = z.object({ enabled: z.boolean(), name: z.string().nullable(), content: z.string().nullable() });

export async function memoryContext(db: CommonQueryMethods, tenantId: string): Promise<MemoryContext> {
  // The setting and the files in one round trip (a turn waits for it): one
  // row with a null name when memory is off or empty. Never more than the
  // budget of a file is read from the database.
  const found = await db.any(sql.type(FileRow)`
    with setting as (
      select coalesce((select enabled from memory_settings where tenant_id = ${tenantId}), ${MEMORY_DEFAULTS.enabled}) as enabled)
    select setting.enabled, f.name, f.content from setting
    left join lateral (select name, left(content, ${MEMORY_PROMPT_BUDGET}) as content from memory_files
      where tenant_id = ${tenantId} and setting.enabled) f on true
    order by f.name`);
  const enabled = found[0]?.enabled ?? MEMORY_DEFAULTS.enabled;
  const rows = found.filter((r): r is { enabled: boolean; name: string; content: string } => r.name !== null);
  if (!enabled) return { enabled: false, text: '', files: [], truncated: false };
  if (rows.length === 0) return { enabled: true, text: '', files: [], truncated: false };
  let text = `${MEMORY_HEADING}\nThe workspace's memory (files kept between conversations):`;
  const files: string[] = [];
  let truncated = false;
  for (const row of rows) {
    const block = `\n\n### ${row.name}\n${row.content.trim()}`;
    if (text.length + block.length > MEMORY_PROMPT_BUDGET) {
      const room = MEMORY_PROMPT_BUDGET - text.length - 40;
      if (room > 100) {
        text += `${block.slice(0, room)}`;
        files.push(row.name);
      }
      text += '\n[memory cut to fit the budget]';
      truncated = true;
      break;
    }
    text += block;
    files.push(row.name);
  }
  return { enabled: true, text, files, truncated };
}
