// The platform's secrets. A development machine should start with nothing
// configured, so missing ones are generated once and kept under DATA_DIR; a
// production process must never sign with a key nobody chose, so there a
// missing secret stops the start.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configError } from './errors.ts';
import type { Env } from './settings.ts';

/** Secrets the platform needs; each is generated in development when absent. */
export const SECRET_NAMES = ['PLATFORM_JWT_SECRET', 'DATA_ENCRYPTION_KEY'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

/** Reads (or creates, mode 0600) the development secrets file. */
function developmentSecrets(dataDir: string): Record<SecretName, string> {
  const file = path.join(dataDir, 'secrets.json');
  let stored: Partial<Record<SecretName, string>> = {};
  if (existsSync(file)) {
    stored = JSON.parse(readFileSync(file, 'utf8')) as Partial<Record<SecretName, string>>;
  }
  let changed = false;
  for (const name of SECRET_NAMES) {
    if (!stored[name]) {
      stored[name] = randomBytes(32).toString('base64');
      changed = true;
    }
  }
  if (changed) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return stored as Record<SecretName, string>;
}

/** The configured secrets, with missing ones generated (development) or refused (production). */
export function resolveSecrets(e: Env, dataDir: string): Record<SecretName, Buffer> {
  const missing = SECRET_NAMES.filter((name) => !e[name]);
  if (missing.length > 0 && e.NODE_ENV === 'production') {
    throw configError(missing.map((n) => `${n}: required when NODE_ENV=production (openssl rand -base64 32)`));
  }
  if (missing.length === 0) {
    return Object.fromEntries(SECRET_NAMES.map((name) => [name, e[name] as Buffer])) as Record<SecretName, Buffer>;
  }
  const generated = developmentSecrets(dataDir);
  return Object.fromEntries(
    SECRET_NAMES.map((name) => [name, e[name] ?? Buffer.from(generated[name], 'base64')]),
  ) as Record<SecretName, Buffer>;
}
