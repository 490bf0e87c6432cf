// The settings tables of docs/configuration.md, made from the declarations so
// the page cannot drift from what the code reads. test/docs/configuration.test.ts
// checks the page holds exactly this text (UPDATE_DOCS=1 rewrites it).
import type { Setting, SettingsGroup } from './declare.ts';
import { GROUPS } from './settings.ts';

export const TABLES_START =
  '<!-- settings tables: made by test/docs/configuration.test.ts from core/config/groups/; do not edit by hand -->';
export const TABLES_END = '<!-- end of settings tables -->';

const code = (value: unknown) => `\`${String(value)}\``;
const cell = (markdown: string) => markdown.replaceAll('|', '\\|');

/** The Default column: what the declaration shows, else its value (and its development value where that differs), else unset. */
export function shownDefault(s: Setting): string {
  if (s.shown !== undefined) return s.shown;
  if (s.default === undefined) return 'unset';
  if (s.devDefault !== undefined && s.devDefault !== s.default)
    return `production ${code(s.default)}, development and test ${code(s.devDefault)}`;
  return code(s.default);
}

/** One section per group: heading, its line of context, and a row per setting in declaration order. */
export function settingsTables(groups: readonly SettingsGroup[] = GROUPS): string {
  const out: string[] = [TABLES_START, ''];
  for (const group of groups) {
    out.push(`## ${group.title}`, '');
    if (group.about) out.push(group.about, '');
    out.push('| Variable | Default | Meaning |', '|---|---|---|');
    for (const [name, s] of Object.entries(group.settings))
      out.push(`| \`${name}\` | ${cell(shownDefault(s))} | ${cell(s.doc)} |`);
    out.push('');
  }
  out.push(TABLES_END);
  return out.join('\n');
}
