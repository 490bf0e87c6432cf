// Lift a login lockout by hand (a person locked out by someone guessing at
// their account, or an office address after a bad script):
//   npm run login:unlock -- --email person@example.com
//   npm run login:unlock -- --address 203.0.113.7
// Clears the failures counted against that account (its password and
// dashboard logins) or that address; the next attempt starts a new count.
import { isIP } from 'node:net';
import { AccountEmail } from '../core/accounts/email.ts';
import { liftLockout } from '../core/accounts/login-throttle.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { commandLogger } from './command-logger.ts';
import { commandLine, usageError } from '../core/process/command-line.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { openDatabase } from './database.ts';

const USAGE = `
usage: npm run login:unlock -- --email <e-mail>
       npm run login:unlock -- --address <IP address>
Lifts a login lockout: clears the failed logins counted against an account
(password and dashboard logins) or a client address. Both may be given.`;
const values = commandLine(USAGE, { email: { type: 'string' }, address: { type: 'string' } });
const email = values.email as string | undefined;
const address = values.address as string | undefined;
if (!email && !address) usageError(USAGE, 'give --email, --address or both');
if (email !== undefined && !AccountEmail.safeParse(email.trim()).success)
  usageError(USAGE, `--email must be an e-mail address; "${email}" is not one`);
if (address !== undefined && !isIP(address))
  usageError(USAGE, `--address must be an IPv4 or IPv6 address; "${address}" is not one`);
const config = loadConfigOrExit();
const logger = commandLogger('login-unlock');
try {
  const { db, close } = await openDatabase(config, logger);
  try {
    const cleared = await liftLockout(db, { email: email?.trim(), address });
    const what = [email && `account ${email.trim()}`, address && `address ${address}`].filter(Boolean).join(' and ');
    // The sentence below is what a person reads; the log line is for LOG_LEVEL=info.
    logger.info({ account: Boolean(email), address: address ?? null, cleared }, 'login lockout lifted by an operator');
    process.stdout.write(
      cleared > 0
        ? `cleared the failed logins of ${what}; the next login is checked afresh\n`
        : `no failed logins were counted for ${what}; nothing to lift\n`,
    );
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
