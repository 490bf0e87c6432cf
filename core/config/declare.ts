// How a platform setting is declared: its parser, its default, and what the
// docs say about it. Everything the platform reads from the environment is
// declared once with `setting` inside a `group` (core/config/groups/); the
// environment schema, the Config built from it and the tables of
// docs/configuration.md all come from those declarations.
import { z } from 'zod';

type Described = {
  /** One line of Markdown: the Meaning column of docs/configuration.md. */
  doc: string;
  /**
   * The Default column when a plain value does not say it: a default worked
   * out from other settings (core/config/assemble.ts), a generated one, or
   * what being unset means.
   */
  shown?: string;
};

export type Setting<S extends z.ZodType = z.ZodType, Default = unknown> = {
  /** Parses one non-empty environment value. */
  schema: S;
  /** Used when the variable is unset (or empty); undefined: the setting stays unset. */
  default: Default;
  /** Used instead of `default` when NODE_ENV is not production (development and tests). */
  devDefault: z.output<S> | undefined;
  doc: string;
  shown: string | undefined;
};

export function setting<S extends z.ZodType>(
  schema: S,
  spec: Described & { default: z.output<S>; devDefault?: z.output<S> },
): Setting<S, z.output<S>>;
export function setting<S extends z.ZodType>(schema: S, spec: Described): Setting<S, undefined>;
export function setting<S extends z.ZodType>(
  schema: S,
  spec: Described & { default?: z.output<S>; devDefault?: z.output<S> },
): Setting<S, z.output<S> | undefined> {
  return { schema, default: spec.default, devDefault: spec.devDefault, doc: spec.doc, shown: spec.shown };
}

/** What a declared setting holds once the environment is read: unset only when it has no default. */
export type ValueOf<T> =
  T extends Setting<infer S, infer D> ? (undefined extends D ? z.output<S> | undefined : z.output<S>) : never;

/** A section of docs/configuration.md, with the settings listed in it. */
export type SettingsGroup<T extends Record<string, Setting> = Record<string, Setting>> = {
  title: string;
  /** One line of Markdown under the section's heading (where the topic is explained at length). */
  about: string | undefined;
  settings: T;
};

export const group = <T extends Record<string, Setting>>(
  title: string,
  about: string | undefined,
  settings: T,
): SettingsGroup<T> => ({ title, about, settings });

/** The value a setting takes when unset, for a production process or any other. */
export const fallbackOf = (s: Setting, production: boolean): unknown =>
  production ? s.default : (s.devDefault ?? s.default);

/** One zod object over every setting: unset ones take their default (for this NODE_ENV) or stay undefined. */
export function envSchema(settings: Record<string, Setting>, production: boolean) {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, s] of Object.entries(settings)) {
    const fallback = fallbackOf(s, production);
    shape[name] = fallback === undefined ? s.schema.optional() : s.schema.default(fallback as never);
  }
  return z.object(shape);
}
