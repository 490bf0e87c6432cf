// The memory text a turn gives the model: the tenant's memory files in name
// order, within MEMORY_PROMPT_BUDGET characters (later files are cut and the
// cut is said). Nothing when memory is disabled or empty.
import { z } from 'zod';
import { sql, type CommonQueryMethods } from '../db/pool.ts';
import { getMemorySettings } from './settings.ts';

/** Characters of memory text one turn may carry. */
export const MEMORY_PROMPT_BUDGET = 8_000;

export const MEMORY_HEADING = '## Memory';

export type MemoryContext = { enabled: boolean; text: string; files: string[]; truncated: boolean };

export async function memoryContext(db: CommonQueryMethods, tenantId: string): Promise<MemoryContext> {
  const settings = await getMemorySettings(db, tenantId);
  if (!settings.enabled) return { enabled: false, text: '', files: [], truncated: false };
  // Never read more than the budget from the database.
  const rows = await db.any(sql.type(z.object({ name: z.string(), content: z.string(), bytes: z.number() }))`
    select name, left(content, ${MEMORY_PROMPT_BUDGET}) as content, bytes from memory_files
    where tenant_id = ${tenantId} order by name`);
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
