// An agent's access token checked while PostgreSQL is away: the signing keys
// cannot be read, which is an outage (503 with Retry-After upstream), never a
// verdict on the token (401 would tell the client its token is bad). Found by
// the soak: a replay right after an api restart during an outage got 401.
import { generateKeyPair, SignJWT } from 'jose';
import t from 'tap';
import type { DatabasePool } from '../../../core/db/pool.ts';
import { isDatabaseUnavailable } from '../../../core/db/unavailable.ts';
import { KeyStore, SIGNING_ALG } from '../../../core/identity/keys.ts';
import { RejectedTokenError, verifyAccessToken } from '../../../core/identity/tokens.ts';

t.test('keys unreadable: the database error, not a rejected token', async (t) => {
  // Every query is refused, as while PostgreSQL restarts.
  const refused = async () => {
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  };
  const keys = new KeyStore({ any: refused } as unknown as DatabasePool, Buffer.alloc(32, 1), 3600);
  const { privateKey } = await generateKeyPair(SIGNING_ALG);
  const token = await new SignJWT({ reg: 'r', tid: 't', scope: 'agent:read' })
    .setProtectedHeader({ alg: SIGNING_ALG, kid: 'some-kid', typ: 'at+jwt' })
    .setIssuer('http://localhost:3000')
    .setAudience('http://localhost:3000/api/agent')
    .setSubject('p')
    .setExpirationTime('5m')
    .sign(privateKey);
  const error = await verifyAccessToken(keys, token, 'http://localhost:3000', 'http://localhost:3000/api/agent').then(
    () => null,
    (e: unknown) => e,
  );
  t.notOk(error instanceof RejectedTokenError, 'not rejected as a bad token');
  t.ok(isDatabaseUnavailable(error), `the outage itself: ${(error as Error).message}`);
});
