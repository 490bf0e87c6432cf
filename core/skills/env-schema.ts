// A skill's configuration fields (PUT /api/skills/:skillId/env-schema, or the
// `env` of its SKILL.md): name, type, required, secret, description and an
// optional default. Values given to configure are checked against them.
import { z } from 'zod';

export const ENV_FIELD_TYPES = ['string', 'number', 'boolean', 'url'] as const;
export const MAX_ENV_FIELDS = 50;
export const MAX_ENV_VALUE_LENGTH = 4_096;

export const EnvField = z
  .object({
    name: z.string().regex(/^[A-Z][A-Z0-9_]{0,63}$/, 'an environment variable name such as API_TOKEN'),
    type: z.enum(ENV_FIELD_TYPES).default('string'),
    required: z.boolean().default(false),
    secret: z.boolean().default(false),
    description: z.string().max(500).default(''),
    default: z.union([z.string().max(MAX_ENV_VALUE_LENGTH), z.number(), z.boolean()]).optional(),
  })
  .strict()
  .meta({ id: 'SkillEnvField' });
export type EnvField = z.infer<typeof EnvField>;

export const EnvSchema = z
  .array(EnvField)
  .max(MAX_ENV_FIELDS)
  .refine((fields) => new Set(fields.map((f) => f.name)).size === fields.length, 'field names must be unique')
  .refine((fields) => fields.every((f) => !(f.secret && f.default !== undefined)), 'a secret field has no default')
  .refine(
    (fields) => fields.every((f) => f.default === undefined || valueProblem(f, f.default) === null),
    'a default must match its type',
  );
export type EnvSchema = z.infer<typeof EnvSchema>;

export type EnvValue = string | number | boolean;

/** Why a value does not fit its field, or null. */
export function valueProblem(field: EnvField, value: EnvValue): string | null {
  switch (field.type) {
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? null : 'a number';
    case 'boolean':
      return typeof value === 'boolean' ? null : 'true or false';
    case 'url':
      return typeof value === 'string' &&
        URL.canParse(value) &&
        /^https?:/i.test(value) &&
        value.length <= MAX_ENV_VALUE_LENGTH
        ? null
        : 'an http(s) URL';
    default:
      return typeof value === 'string' && value.length <= MAX_ENV_VALUE_LENGTH
        ? null
        : `text of at most ${MAX_ENV_VALUE_LENGTH} characters`;
  }
}

export type ValueIssue = { path: string; message: string };

/** Checks a complete set of values: unknown names, wrong types, missing required fields. */
export function checkValues(schema: readonly EnvField[], values: Record<string, EnvValue>): ValueIssue[] {
  const issues: ValueIssue[] = [];
  const byName = new Map(schema.map((f) => [f.name, f]));
  for (const [name, value] of Object.entries(values)) {
    const field = byName.get(name);
    if (!field) issues.push({ path: `body.values.${name}`, message: 'not a field of this skill' });
    else {
      const problem = valueProblem(field, value);
      if (problem) issues.push({ path: `body.values.${name}`, message: `expected ${problem}` });
    }
  }
  for (const field of schema) {
    if (field.required && field.default === undefined && !(field.name in values))
      issues.push({ path: `body.values.${field.name}`, message: 'required' });
  }
  return issues;
}
