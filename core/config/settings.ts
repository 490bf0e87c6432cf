// Every platform setting, by section, in the order docs/configuration.md lists
// them. A variable declared in two sections is a mistake caught here, when
// the module loads, rather than a silent override by the later one.
import type { SettingsGroup, ValueOf } from './declare.ts';
import { agents } from './groups/agents.ts';
import { billing } from './groups/billing.ts';
import { channels } from './groups/channels.ts';
import { database } from './groups/database.ts';
import { externalLogin } from './groups/external-login.ts';
import { logins } from './groups/logins.ts';
import { models } from './groups/models.ts';
import { observability } from './groups/observability.ts';
import { plans } from './groups/plans.ts';
import { retention } from './groups/retention.ts';
import { secrets } from './groups/secrets.ts';
import { server } from './groups/server.ts';
import { teams } from './groups/teams.ts';
import { websockets } from './groups/websockets.ts';
import { workers } from './groups/workers.ts';

export const GROUPS: readonly SettingsGroup[] = [
  server,
  database,
  observability,
  workers,
  plans,
  retention,
  websockets,
  logins,
  teams,
  externalLogin,
  agents,
  models,
  billing,
  channels,
  secrets,
];

export const SETTINGS = {
  ...server.settings,
  ...database.settings,
  ...observability.settings,
  ...workers.settings,
  ...plans.settings,
  ...retention.settings,
  ...websockets.settings,
  ...logins.settings,
  ...teams.settings,
  ...externalLogin.settings,
  ...agents.settings,
  ...models.settings,
  ...billing.settings,
  ...channels.settings,
  ...secrets.settings,
};

export type SettingName = keyof typeof SETTINGS;

/** The environment once read: each setting's parsed value, or its default. */
export type Env = { [K in SettingName]: ValueOf<(typeof SETTINGS)[K]> };

const declared = GROUPS.flatMap((g) => Object.keys(g.settings));
const twice = declared.filter((name, i) => declared.indexOf(name) !== i);
if (twice.length > 0 || declared.length !== Object.keys(SETTINGS).length) {
  throw new Error(`settings declared twice or outside GROUPS: ${twice.join(', ') || 'check SETTINGS against GROUPS'}`);
}
