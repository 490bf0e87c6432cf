// `npm run keys:rotate`: the identity provider signs with a new ES256 key
// from now on. The old key stays in the JWKS, and keeps verifying what it
// signed, until the longest-lived assertion it signed has expired. Other api
// replicas pick the new key up within a minute (or at once on a new kid).
import { loadConfigOrExit } from '../core/config.ts';
import { KeyStore } from '../core/identity/keys.ts';
import { commandLogger } from './command-logger.ts';
import { exitWithError } from '../core/process/lifecycle.ts';
import { commandLine } from '../core/process/command-line.ts';
import { openDatabase } from './database.ts';

commandLine(
  `
usage: npm run keys:rotate
The identity provider signs with a new ES256 key from now on; the old one
keeps verifying what it signed until that has expired.`,
  {},
);
const config = loadConfigOrExit();
const logger = commandLogger('keys');
try {
  const { db, close } = await openDatabase(config, logger);
  try {
    const keys = new KeyStore(db, config.secrets.DATA_ENCRYPTION_KEY, config.identity.assertionTtlS);
    await keys.signingKey();
    const kid = await keys.rotate();
    process.stdout.write(`new signing key ${kid}; the previous one verifies until its tokens expire\n`);
  } finally {
    await close();
  }
} catch (error) {
  exitWithError(null, error);
}
