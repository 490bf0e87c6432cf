// What a turn (chat turn or company run) adds to the model's prompt from the
// workspace: one system message with the enabled memory and the usable
// skills, or nothing when both are empty. Changing memory or skills changes
// the next answer.
import type { CommonQueryMethods } from '../db/pool.ts';
import { recordToolUses, skillTool } from '../activity/tool-uses.ts';
import { memoryContext } from '../memory/context.ts';
import type { ChatMessage } from '../providers/types.ts';
import { skillsContext } from './context.ts';

export async function workspaceContext(db: CommonQueryMethods, tenantId: string): Promise<string> {
  const [memory, skills] = await Promise.all([memoryContext(db, tenantId), skillsContext(db, tenantId)]);
  // Counted per turn that offered the skill (a retried turn counts again).
  await recordToolUses(db, tenantId, skills.skills.map(skillTool));
  return [memory.text, skills.text].filter((t) => t !== '').join('\n\n');
}

/** The messages with the workspace context as a system message in front (merged into a leading system message). */
export async function withWorkspaceContext(
  db: CommonQueryMethods,
  tenantId: string,
  messages: ChatMessage[],
): Promise<ChatMessage[]> {
  const context = await workspaceContext(db, tenantId);
  if (context === '') return messages;
  const [first, ...rest] = messages;
  if (first?.role === 'system') return [{ role: 'system', content: `${first.content}\n\n${context}` }, ...rest];
  return [{ role: 'system', content: context }, ...messages];
}
