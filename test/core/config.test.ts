import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../core/config.ts';

const dataDir = () => mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR ?? tmpdir(), 'config-'));
const secret = Buffer.alloc(32, 1).toString('base64');

t.test('defaults give a working development configuration', async (t) => {
  const dir = dataDir();
  const config = loadConfig({ DATA_DIR: dir });
  t.equal(config.nodeEnv, 'development');
  t.equal(config.port, 3000);
  t.equal(config.baseUrl, 'http://localhost:3000');
  t.equal(config.authUrl, config.baseUrl, 'AUTH_URL defaults to BASE_URL: one process serves both');
  t.equal(config.databaseUrl, undefined, 'no DATABASE_URL means the embedded PostgreSQL');
});

t.test('a bad value names the variable', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'eighty' }, /PORT/],
    [{ PORT: '70000' }, /PORT/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL: must be a postgres/],
    [{ BASE_URL: 'not a url' }, /BASE_URL/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ PLATFORM_JWT_SECRET: 'short' }, /PLATFORM_JWT_SECRET: must be 32 bytes/],
    [{ TRUST_PROXY: 'maybe' }, /TRUST_PROXY/],
    [{ NODE_ENV: 'staging' }, /NODE_ENV/],
    [{ SMTP_URL: 'http://mail.example.com' }, /SMTP_URL: must be an smtp:\/\/ or smtps:\/\/ URL/],
    [{ PLAN_FAIR_WEIGHTS: 'gold=1' }, /PLAN_FAIR_WEIGHTS: expected plan=value pairs/],
    [{ PARTNER_ISSUER: 'http://idp.example.com' }, /PARTNER_ISSUER: must be an https:\/\/ issuer URL/],
    [{ LOGIN_LOCKOUT_MINUTES: '0' }, /LOGIN_LOCKOUT_MINUTES/],
  ];
  for (const [env, pattern] of cases) {
    t.throws(() => loadConfig({ DATA_DIR: dataDir(), ...env }), pattern, JSON.stringify(env));
  }
  try {
    loadConfig({ DATA_DIR: dataDir(), PORT: 'x', WORKER_CONCURRENCY: '0' });
  } catch (error) {
    t.type(error, ConfigError);
    t.match((error as Error).message, /PORT/);
    t.match((error as Error).message, /WORKER_CONCURRENCY/, 'every bad variable is named, not just the first');
  }
});

t.test('in production a missing secret stops the start', async (t) => {
  t.throws(
    () => loadConfig({ NODE_ENV: 'production', DATA_DIR: dataDir(), DATABASE_URL: 'postgres://x/y' }),
    /PLATFORM_JWT_SECRET: required when NODE_ENV=production/,
  );
  const config = loadConfig({
    NODE_ENV: 'production',
    DATA_DIR: dataDir(),
    PLATFORM_JWT_SECRET: secret,
    DATA_ENCRYPTION_KEY: secret,
  });
  t.equal(config.secrets.PLATFORM_JWT_SECRET.length, 32);
});

t.test('in development missing secrets are generated once, kept private, and reused', async (t) => {
  const dir = dataDir();
  const first = loadConfig({ DATA_DIR: dir });
  const file = path.join(dir, 'secrets.json');
  t.ok(existsSync(file));
  t.equal(statSync(file).mode & 0o777, 0o600, 'secrets file is mode 0600');
  const second = loadConfig({ DATA_DIR: dir });
  t.same(second.secrets.PLATFORM_JWT_SECRET, first.secrets.PLATFORM_JWT_SECRET, 'same secret on the next start');
  t.not(first.secrets.PLATFORM_JWT_SECRET.toString('hex'), first.secrets.DATA_ENCRYPTION_KEY.toString('hex'));
  t.notMatch(readFileSync(file, 'utf8'), /undefined/);
  const given = loadConfig({ DATA_DIR: dir, PLATFORM_JWT_SECRET: secret });
  t.same(given.secrets.PLATFORM_JWT_SECRET, Buffer.from(secret, 'base64'), 'an explicit secret wins');
});

t.test(
  'the billing sandbox signs with a configured STRIPE_WEBHOOK_SECRET, else one derived from the platform secret',
  async (t) => {
    const sandbox = loadConfig({
      DATA_DIR: dataDir(),
      PLATFORM_JWT_SECRET: secret,
      STRIPE_WEBHOOK_SECRET: 'whsec_configured_by_me',
    });
    t.equal(sandbox.billing.mode, 'sandbox');
    t.equal(sandbox.billing.stripe.webhookSecret, 'whsec_configured_by_me');
    const derived = loadConfig({ DATA_DIR: dataDir(), PLATFORM_JWT_SECRET: secret });
    t.match(derived.billing.stripe.webhookSecret, /^whsec_[\w-]{20,}$/);
    t.equal(
      loadConfig({ DATA_DIR: dataDir(), PLATFORM_JWT_SECRET: secret }).billing.stripe.webhookSecret,
      derived.billing.stripe.webhookSecret,
      'stable across starts',
    );
  },
);
