// Accounts from the command line (there is no open sign-up):
//   npm run user:create -- --email ada@example.com [--name "Ada"] [--operator]
//   npm run operator:create -- --email ops@example.com
// The password is read from standard input when it is piped
// (`printf '%s' "$PW" | npm run user:create -- ...`); with nothing piped (a
// terminal, or an empty stdin) a strong one is generated and printed once.
// An existing e-mail with --operator is promoted to operator instead.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { commandLine, usageError } from '../core/process/command-line.ts';
import { loadConfigOrExit } from '../core/config.ts';
import { canonicalEmail } from '../core/accounts/email.ts';
import { createUser, EmailTakenError } from '../core/accounts/users.ts';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../core/crypto/passwords.ts';
import { sql } from '../core/db/pool.ts';
import { hasControlCharacter, NAME_CONTROL_MESSAGE } from '../core/names.ts';
import { commandLogger } from './command-logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { openDatabase } from './database.ts';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

const USAGE = `
usage: npm run user:create -- --email <e-mail> [--name "<name>"] [--operator]
       npm run operator:create -- --email <e-mail>
Creates a person's account (there is no open sign-up). Pipe the password in
(printf '%s' "$PW" | npm run user:create -- ...); with nothing piped a strong
one is generated and printed once. --operator makes (or promotes) a platform
operator.`;
const values = commandLine(USAGE, {
  email: { type: 'string' },
  name: { type: 'string' },
  operator: { type: 'boolean', default: false },
});
const config = loadConfigOrExit();
const logger = commandLogger('accounts');
try {
  const email = z.email().max(320).safeParse(values.email);
  if (!email.success || !canonicalEmail(email.data)) usageError(USAGE, '--email must be an e-mail address');
  if (values.name !== undefined && hasControlCharacter(values.name))
    usageError(USAGE, `--name: ${NAME_CONTROL_MESSAGE}`);
  // Nothing piped in (a terminal, or an empty stdin such as /dev/null in a
  // script): a strong password is generated and printed once.
  const given = process.stdin.isTTY ? '' : await readStdin();
  const generated = given === '';
  const password = generated ? randomBytes(15).toString('base64url') : given;
  if (password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH) {
    throw new Error(
      `the piped password has ${password.length} characters; it must have ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} (pipe nothing to get a generated one)`,
    );
  }
  const { db, close } = await openDatabase(config, logger);
  try {
    try {
      const user = await createUser(db, {
        email: email.data,
        password,
        displayName: values.name,
        operator: values.operator,
      });
      process.stdout.write(`created ${user.is_operator ? 'operator' : 'user'} ${user.email} (${user.id})\n`);
      if (generated) process.stdout.write(`password (shown once): ${password}\n`);
    } catch (error) {
      if (!(error instanceof EmailTakenError) || !values.operator) throw error;
      await db.query(
        sql.unsafe`update users set is_operator = true, updated_at = now() where email_key = canonical_email(${email.data})`,
      );
      process.stdout.write(`${email.data} already exists; it is now the platform operator (password unchanged)\n`);
    }
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
