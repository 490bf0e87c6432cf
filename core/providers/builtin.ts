// The built-in offline model (builtin/offline): deterministic, no network,
// free. It lets a new workspace chat at once, before anyone adds a key, and
// gives tests a provider that needs no server.
import { estimateInputTokens, estimateTokens } from './errors.ts';
import type { ChatMessage, CompletionRequest, CompletionResult, ModelInfo, ProviderAdapter } from './types.ts';

export const BUILTIN_MODELS: readonly ModelInfo[] = [
  {
    id: 'offline',
    name: 'Offline (built-in)',
    contextWindow: 8_192,
    inputPricePerMTokMicros: 0,
    outputPricePerMTokMicros: 0,
  },
];

const QUOTE_LIMIT = 160;

function quote(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= QUOTE_LIMIT ? flat : `${flat.slice(0, QUOTE_LIMIT - 1).trimEnd()}…`;
}

/** A "## Heading" section of the system messages (the workspace context), up to the next "## ". */
function systemSection(messages: readonly ChatMessage[], heading: string): string | null {
  const system = messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  const start = system.indexOf(`${heading}\n`);
  if (start < 0) return null;
  const body = system.slice(start + heading.length + 1);
  const end = body.search(/\n## /);
  return end < 0 ? body : body.slice(0, end);
}

/**
 * Questions about the workspace context: a message that mentions memory (or
 * "remember") is answered from the memory section, one that mentions skills
 * with the skills' names, so a change of either shows in the next answer.
 */
function workspaceReply(messages: readonly ChatMessage[], question: string): string | null {
  if (/\b(memory|remember)\b/i.test(question)) {
    const memory = systemSection(messages, '## Memory');
    if (memory === null) return 'My memory is empty (or switched off) in this workspace.';
    const text = memory
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('The workspace'))
      .map((l) => (l.startsWith('### ') ? `(${l.slice(4)})` : l))
      .join(' ');
    return `From memory: "${quote(text)}"`;
  }
  if (/\bskills?\b/i.test(question)) {
    const skills = systemSection(messages, '## Skills');
    const names = skills === null ? [] : [...skills.matchAll(/^### (\S+)/gm)].map((m) => m[1]!);
    return names.length === 0
      ? 'I have no skills installed in this workspace.'
      : `Skills I can use: ${names.join(', ')}.`;
  }
  return null;
}

/** The whole answer for a conversation; the same input always gives the same text. */
export function offlineReply(messages: readonly ChatMessage[]): string {
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  if (!lastUser || lastUser.content.trim() === '') {
    return 'Hello! I am the built-in offline model. Send me a message and I will echo it back.';
  }
  const fromWorkspace = workspaceReply(messages, lastUser.content);
  if (fromWorkspace) return fromWorkspace;
  const words = lastUser.content.trim().split(/\s+/).length;
  const turns = messages.filter((m) => m.role === 'user').length;
  return (
    `You said: "${quote(lastUser.content)}" (${words} ${words === 1 ? 'word' : 'words'}, message ${turns} of this conversation). ` +
    'I am the built-in offline model of this session, so I can only echo. For a real model, add its provider key ' +
    '(PUT /api/provider-keys/openai) and start a session with it (POST /api/chat/sessions {"model":"openai/gpt-4o-mini"}): ' +
    'a session keeps the model it was started with.'
  );
}

/** Splits text into about `parts` pieces at word boundaries, so deltas look like a stream. */
export function splitForStreaming(text: string, parts: number): string[] {
  const words = text.match(/\S+\s*/g) ?? [];
  if (words.length === 0) return text ? [text] : [];
  const n = Math.max(1, Math.min(parts, words.length));
  return Array.from({ length: n }, (_, i) =>
    words.slice(Math.floor((i * words.length) / n), Math.floor(((i + 1) * words.length) / n)).join(''),
  );
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

async function complete(request: CompletionRequest): Promise<CompletionResult> {
  let reply = offlineReply(request.messages);
  let finishReason = 'stop';
  // Honour an output limit like a real model would: cut and say so.
  const limit = request.maxOutputTokens;
  if (limit !== undefined && estimateTokens(reply) > limit) {
    reply = reply.slice(0, Math.max(0, limit * 4));
    finishReason = 'length';
  }
  let text = '';
  for (const piece of splitForStreaming(reply, 5)) {
    if (request.signal?.aborted) throw abortReason(request.signal);
    // Yield to the event loop between pieces, as a network stream would.
    await new Promise<void>((resolve) => setImmediate(resolve));
    text += piece;
    await request.onDelta?.(piece);
  }
  return { text, inputTokens: estimateInputTokens(request.messages), outputTokens: estimateTokens(text), finishReason };
}

export const builtinAdapter: ProviderAdapter = {
  id: 'builtin',
  displayName: 'Built-in (offline)',
  needsKey: false,
  models: BUILTIN_MODELS,
  complete,
  async validateKey() {
    return { valid: true };
  },
};
