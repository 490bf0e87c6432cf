// The login budget (core/accounts/login-throttle.ts): failures per account and
// per address. Development gets looser bounds: a person trying things out
// mistypes more than an attacker's budget should allow in production.
import { group, setting } from '../declare.ts';
import { intFromEnv } from '../parsers.ts';

export const logins = group(
  'Login budget',
  'How failures are counted: [The login budget](accounts-and-tenants.md#the-login-budget).',
  {
    LOGIN_FAILURES_PER_ACCOUNT: setting(intFromEnv(1, 1_000_000), {
      default: 10,
      devDefault: 20,
      doc: 'Failed logins that lock an account (its e-mail) for the rest of the window; a correct password spends nothing',
    }),
    LOGIN_FAILURES_PER_ADDRESS: setting(intFromEnv(1, 1_000_000), {
      default: 100,
      devDefault: 500,
      doc: 'Failed logins, across accounts, that lock a client address',
    }),
    LOGIN_LOCKOUT_MINUTES: setting(intFromEnv(1, 24 * 60), {
      default: 15,
      doc: 'The window failures are counted in, and so the longest a lockout lasts',
    }),
  },
);
