// Keys the platform signs and seals with. Unset in development they are
// generated once under DATA_DIR; unset in production the process refuses to
// start (core/config/secrets.ts).
import { group, setting } from '../declare.ts';
import { secret32 } from '../parsers.ts';

const generated = 'generated in development';

export const secrets = group('Secrets', undefined, {
  PLATFORM_JWT_SECRET: setting(secret32, { shown: generated, doc: '32 bytes, base64: signs platform JWTs' }),
  DATA_ENCRYPTION_KEY: setting(secret32, {
    shown: generated,
    doc: '32 bytes, base64: AES-256-GCM key for secrets at rest',
  }),
  DATA_ENCRYPTION_KEY_PREVIOUS: setting(secret32, {
    doc: 'A retired data key that still opens what it sealed: to rotate, set a new `DATA_ENCRYPTION_KEY` and the old one here',
  }),
});
