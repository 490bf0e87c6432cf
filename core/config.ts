// One validated configuration for every process (api, worker, ops scripts).
// Read once from the environment; a bad value stops the process with a message
// that names the variable. Each variable is declared once, in
// core/config/groups/ (its parser, default, documentation and section of
// docs/configuration.md); this module reads them and hands consumers the
// Config below. Secrets missing in development are generated once and kept
// under DATA_DIR; in production a missing secret is a startup error.
import path from 'node:path';
import type { z } from 'zod';
import { assembleConfig } from './config/assemble.ts';
import { envSchema } from './config/declare.ts';
import { ConfigError, configError } from './config/errors.ts';
import { resolveSecrets } from './config/secrets.ts';
import { SETTINGS, type Env } from './config/settings.ts';

export { ConfigError } from './config/errors.ts';
export { SECRET_NAMES } from './config/secrets.ts';

/**
 * The configuration every process reads: the shape assembleConfig builds
 * (core/config/assemble.ts, which documents each field), so a setting is
 * declared in core/config/groups/ and placed there, and nowhere else.
 */
export type Config = ReturnType<typeof assembleConfig>;
export type { BillingConfig, BillingMode } from './config/billing.ts';

const schemas = { production: envSchema(SETTINGS, true), other: envSchema(SETTINGS, false) };

function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${issue.path.join('.') || '(environment)'}: ${issue.message}`);
}

/** Every declared setting parsed, unset ones at their default for this NODE_ENV. */
function readEnv(env: NodeJS.ProcessEnv): Env {
  // Empty strings count as unset, as shells and .env files often leave them.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schemas[cleaned.NODE_ENV === 'production' ? 'production' : 'other'].safeParse(cleaned);
  if (!parsed.success) throw configError(describeIssues(parsed.error));
  return parsed.data as Env;
}

/**
 * Builds the configuration from an environment map (process.env by default).
 * Throws ConfigError naming every bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = readEnv(env);
  const dataDir = path.resolve(e.DATA_DIR);
  return assembleConfig(e, dataDir, resolveSecrets(e, dataDir));
}

/** For process entries: load the config or print the reason and exit 1. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
