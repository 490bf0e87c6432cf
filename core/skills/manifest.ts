// SKILL.md: YAML front matter between '---' lines, then the instructions
// (Markdown). Fields: name and description (required, as in the open Agent
// Skills layout), version, env (configuration fields) and allowed-tools.
import type * as Yaml from 'yaml';
import { lazyRequire } from '../lazy-require.ts';

/** yaml, loaded at the first manifest read. */
const yaml = lazyRequire<typeof Yaml>('yaml');
import { z } from 'zod';
import { EnvSchema } from './env-schema.ts';

export const SKILL_NAME = /^[a-z0-9](-?[a-z0-9])*$/;

const FrontMatter = z
  .object({
    name: z.string().min(1).max(64).regex(SKILL_NAME, 'lowercase letters, digits and single hyphens'),
    description: z.string().trim().min(1).max(1024),
    version: z
      .union([z.string().trim().min(1).max(64), z.number()])
      .transform(String)
      .optional(),
    env: EnvSchema.optional(),
    'allowed-tools': z.union([z.string().max(2000), z.array(z.string().min(1).max(200)).max(100)]).optional(),
  })
  .loose();

export type Manifest = {
  name: string;
  description: string;
  version: string | null;
  env: EnvSchema | null;
  allowedTools: string[];
  instructions: string;
  frontMatter: Record<string, unknown>;
};

export class ManifestError extends Error {
  override name = 'ManifestError';
}

export function parseManifest(text: string): Manifest {
  const match = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)([\s\S]*)$/.exec(text);
  if (!match) throw new ManifestError('SKILL.md must start with YAML front matter between --- lines');
  let data: unknown;
  try {
    data = yaml().parse(match[1]!, { maxAliasCount: 10 });
  } catch (error) {
    throw new ManifestError(`the front matter is not valid YAML (${(error as Error).message.split('\n')[0]})`);
  }
  const parsed = FrontMatter.safeParse(data ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ManifestError(`front matter ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const fm = parsed.data;
  const tools = fm['allowed-tools'];
  return {
    name: fm.name,
    description: fm.description,
    version: fm.version ?? null,
    env: fm.env ?? null,
    allowedTools: tools === undefined ? [] : typeof tools === 'string' ? tools.split(/[\s,]+/).filter(Boolean) : tools,
    instructions: match[2]!.trim(),
    frontMatter: JSON.parse(JSON.stringify(data)) as Record<string, unknown>,
  };
}
