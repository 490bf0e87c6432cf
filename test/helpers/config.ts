// Configuration for tests: fixed secrets, a scratch data directory, quiet logs
// (TEST_LOG_LEVEL=debug to see them), short worker bounds.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../core/config.ts';
import { createLogger } from '../../core/logger.ts';

export const TEST_SECRET = Buffer.alloc(32, 7).toString('base64');

export function testEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl,
    DATA_DIR: mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR ?? tmpdir(), 'data-')),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    BASE_URL: 'http://localhost:3000',
    PLATFORM_JWT_SECRET: TEST_SECRET,
    DATA_ENCRYPTION_KEY: TEST_SECRET,
    WORKER_POLL_INTERVAL_MS: '200',
    WORKER_HEARTBEAT_MS: '500',
    WORKER_STALE_AFTER_MS: '3000',
    WORKER_SWEEP_INTERVAL_MS: '1000',
    SHUTDOWN_TIMEOUT_MS: '5000',
    ...overrides,
  };
}

export function testConfig(databaseUrl: string, overrides: Record<string, string> = {}): Config {
  return loadConfig(testEnv(databaseUrl, overrides));
}

export const testLogger = (name = 'test') => createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', name);
