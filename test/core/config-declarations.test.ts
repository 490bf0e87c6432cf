// The declarations behind the config (core/config/groups/): what the docs
// show for each setting is what the code does, and a development default
// applies only outside production.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../core/config.ts';
import { shownDefault } from '../../core/config/docs.ts';
import { SETTINGS } from '../../core/config/settings.ts';

const dataDir = () => mkdtempSync(path.join(process.env.TEST_SCRATCH_DIR ?? tmpdir(), 'config-'));
const secret = Buffer.alloc(32, 1).toString('base64');
const production = { NODE_ENV: 'production', PLATFORM_JWT_SECRET: secret, DATA_ENCRYPTION_KEY: secret };

t.test('a default, typed in as the docs show it, gives the same value', async (t) => {
  for (const [name, s] of Object.entries(SETTINGS)) {
    for (const value of [s.default, s.devDefault]) {
      if (value === undefined) continue;
      t.same(s.schema.parse(String(value)), value, `${name}=${String(value)}`);
      if (s.shown === undefined) t.match(shownDefault(s), `\`${String(value)}\``, `${name}'s Default column shows it`);
    }
  }
});

t.test('each setting has one line of documentation', async (t) => {
  for (const [name, s] of Object.entries(SETTINGS)) {
    t.ok(s.doc.trim().length > 0 && !s.doc.includes('\n'), `${name}: doc`);
    t.ok(!shownDefault(s).includes('\n'), `${name}: default`);
  }
});

t.test('the login budget is looser outside production, and a set value wins everywhere', async (t) => {
  const minutes = 15 * 60_000;
  t.same(loadConfig({ ...production, DATA_DIR: dataDir() }).loginThrottle, {
    perAccount: 10,
    perAddress: 100,
    windowMs: minutes,
  });
  t.same(
    loadConfig({ DATA_DIR: dataDir() }).loginThrottle,
    { perAccount: 20, perAddress: 500, windowMs: minutes },
    'development',
  );
  t.same(
    loadConfig({ NODE_ENV: 'test', DATA_DIR: dataDir() }).loginThrottle,
    { perAccount: 20, perAddress: 500, windowMs: minutes },
    'tests',
  );
  const set = { LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_FAILURES_PER_ADDRESS: '7', LOGIN_LOCKOUT_MINUTES: '2' };
  for (const env of [{ ...production, ...set }, set]) {
    t.same(loadConfig({ ...env, DATA_DIR: dataDir() }).loginThrottle, {
      perAccount: 3,
      perAddress: 7,
      windowMs: 120_000,
    });
  }
});

t.test('settings once declared beside their modules reach the config', async (t) => {
  const config = loadConfig({
    DATA_DIR: dataDir(),
    BASE_URL: 'https://platform.example.com',
    INVITATIONS_PER_DAY: '8',
    SMTP_URL: 'smtps://user:pw@mail.example.com:465',
    PLAN_MAX_WORKSPACES: 'free=2,pro=4',
    ALTIDP_APP_CLIENT_IDS: 'com.example.app, com.example.other',
  });
  t.same(config.teams, {
    invitationTtlHours: 168,
    invitationsPerDay: 8,
    pendingInvitations: 100,
    smtpUrl: 'smtps://user:pw@mail.example.com:465',
    mailFrom: 'Agent platform <no-reply@platform.example.com>',
  });
  t.same(config.planLimits, { fairWeight: {}, maxWorkspaces: { free: 2, pro: 4 }, maxOpenJobs: {} });
  t.same(config.externalLogin.altidp.appClientIds, ['com.example.app', 'com.example.other']);
  t.equal(config.externalLogin.partner.connectRedirectUri, 'https://platform.example.com/oauth/partner/callback');
});
