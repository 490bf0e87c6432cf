// The logger of an ops command (npm run user:create, tenant:plan, ...): its
// own output is what a person reads, so it logs warnings and errors only,
// unless LOG_LEVEL (declared with the platform's settings) asks for more.
import type { Logger } from 'pino';
import type { z } from 'zod';
import { observability } from '../core/config/groups/observability.ts';
import { createLogger } from '../core/logger.ts';

type Level = z.output<typeof observability.settings.LOG_LEVEL.schema>;

export function commandLogger(name: string, unset: Level = 'warn'): Logger {
  const level = observability.settings.LOG_LEVEL.schema.safeParse(process.env.LOG_LEVEL);
  return createLogger(level.success ? level.data : unset, name);
}
