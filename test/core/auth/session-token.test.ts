// Session tokens are HS256 JWTs signed and verified with node:crypto. They
// must accept what jose accepts for these tokens (tokens issued before the
// switch, by jose, keep working) and refuse what jose refuses: another kind,
// issuer or algorithm, an expired or not-yet-valid token, any change to any
// byte, and a `crit` header.
import { createHmac } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import t, { type Test } from 'tap';
import {
  InvalidTokenError,
  signSessionToken,
  verifySessionToken,
  verifySessionTokenClaims,
} from '../../../core/auth/session-token.ts';

const secret = new Uint8Array(32).fill(7);
const other = new Uint8Array(32).fill(8);
const issuer = 'http://platform.test';
const subject = '5f0c6a38-4b7e-4d52-9a43-0d5c2b7c1e11';
const now = () => Math.floor(Date.now() / 1000);
const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A token with any header and claims, signed with `key`. */
function forge(header: unknown, claims: unknown, key = secret): string {
  const input = `${b64(header)}.${b64(claims)}`;
  return `${input}.${createHmac('sha256', key).update(input).digest('base64url')}`;
}
const good = (extra: Record<string, unknown> = {}) => ({
  typ: 'platform',
  sub: subject,
  iss: issuer,
  aud: 'platform',
  iat: now(),
  exp: now() + 60,
  ...extra,
});

const refused = async (t: Test, token: string, why: string, message = 'malformed, or not signed by this service') =>
  t.rejects(verifySessionToken('platform', token, secret, issuer), new InvalidTokenError(message), why);

t.test('a token we sign verifies here and with jose, with its subject and expiry', async (t) => {
  const token = await signSessionToken('platform', subject, secret, issuer, 900);
  const verified = await verifySessionTokenClaims('platform', token, secret, issuer);
  t.equal(verified.subject, subject);
  t.ok(Math.abs(verified.expiresAt.getTime() - (Date.now() + 900_000)) < 2000, 'expires in 15 minutes');
  const { payload, protectedHeader } = await jwtVerify(token, secret, {
    algorithms: ['HS256'],
    issuer,
    audience: 'platform',
  });
  t.same(protectedHeader, { alg: 'HS256', typ: 'JWT' });
  t.equal(payload.sub, subject);
  t.equal(payload.typ, 'platform');
});

t.test('a token jose signed (as before this module used node:crypto) verifies', async (t) => {
  const token = await new SignJWT({ typ: 'dashboard' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(subject)
    .setIssuer(issuer)
    .setAudience('dashboard')
    .setIssuedAt()
    .setExpirationTime('60s')
    .sign(secret);
  t.equal(await verifySessionToken('dashboard', token, secret, issuer), subject);
});

t.test('another kind, issuer or secret is refused', async (t) => {
  const dashboard = await signSessionToken('dashboard', subject, secret, issuer, 60);
  await refused(t, dashboard, 'a dashboard token is no platform token');
  await refused(t, forge({ alg: 'HS256' }, good({ aud: 'dashboard' })), 'audience of another kind');
  await refused(
    t,
    forge({ alg: 'HS256' }, good({ typ: 'dashboard' })),
    'typ of another kind',
    'no subject of this kind',
  );
  await refused(t, forge({ alg: 'HS256' }, good({ iss: 'http://elsewhere.test' })), 'another issuer');
  await refused(t, forge({ alg: 'HS256' }, good(), other), 'signed with another secret');
  await refused(
    t,
    forge({ alg: 'HS256' }, good({ sub: 42 })),
    'a subject that is no string',
    'no subject of this kind',
  );
  t.equal(
    await verifySessionToken('platform', forge({ alg: 'HS256' }, good({ aud: ['x', 'platform'] })), secret, issuer),
    subject,
    'an audience list naming the kind',
  );
});

t.test('expiry and not-before are enforced', async (t) => {
  await refused(t, forge({ alg: 'HS256' }, good({ exp: now() - 1 })), 'expired', 'expired');
  await refused(t, forge({ alg: 'HS256' }, good({ exp: now() })), 'expiring this second', 'expired');
  await refused(t, forge({ alg: 'HS256' }, good({ exp: undefined })), 'no expiry');
  await refused(t, forge({ alg: 'HS256' }, good({ exp: String(now() + 60) })), 'a textual expiry');
  await refused(t, forge({ alg: 'HS256' }, good({ nbf: now() + 60 })), 'not valid yet');
  await refused(t, forge({ alg: 'HS256' }, good({ iat: 'yesterday' })), 'a textual issued-at');
  t.equal(
    await verifySessionToken('platform', forge({ alg: 'HS256' }, good({ nbf: now() - 1 })), secret, issuer),
    subject,
    'valid since a second',
  );
});

t.test('other algorithms, crit headers and tampered or malformed tokens are refused', async (t) => {
  await refused(t, forge({ alg: 'none' }, good()), 'alg none, even with a valid MAC');
  await refused(t, forge({ alg: 'HS512' }, good()), 'another HMAC algorithm named');
  await refused(t, forge({ alg: 'HS256', crit: ['exp'] }, good()), 'a crit header');
  await refused(t, forge({ alg: 'HS256', b64: false }, good()), 'unencoded payload option');
  await refused(t, `${b64({ alg: 'none' })}.${b64(good())}.`, 'unsigned');
  const token = await signSessionToken('platform', subject, secret, issuer, 60);
  const [h, p, s] = token.split('.') as [string, string, string];
  await refused(t, `${h}.${b64(good({ sub: 'someone-else' }))}.${s}`, 'claims changed after signing');
  const flipped = s.slice(0, -2) + (s.at(-2) === 'A' ? 'B' : 'A') + s.at(-1);
  await refused(t, `${h}.${p}.${flipped}`, 'a changed signature');
  await refused(t, `${h}.${p}.${s}=`, 'padding in the signature');
  await refused(t, `${h}.${p}`, 'two segments');
  await refused(t, `${token}.x`, 'four segments');
  await refused(t, `${h}.${p}.${s.slice(0, -4)}`, 'a short signature');
  await refused(t, forge('not an object', good()), 'a header that is no object');
  await refused(t, forge({ alg: 'HS256' }, [good()]), 'claims that are no object');
  const garbage = `${Buffer.from('{not json').toString('base64url')}`;
  const input = `${h}.${garbage}`;
  await refused(
    t,
    `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`,
    'claims that are no JSON',
  );
  await refused(t, '', 'empty');
});

t.test(
  'a token verified before is answered from memory only while it is the same token, under the same secret, and valid',
  async (t) => {
    const token = await signSessionToken('platform', subject, secret, issuer, 60);
    const first = await verifySessionTokenClaims('platform', token, secret, issuer);
    t.same(await verifySessionTokenClaims('platform', token, secret, issuer), first, 'the same answer the second time');
    // After a successful verify, every variant must still be refused.
    const [h, p, s] = token.split('.') as [string, string, string];
    const flipped = s.slice(0, -2) + (s.at(-2) === 'A' ? 'B' : 'A') + s.at(-1);
    await refused(t, `${h}.${p}.${flipped}`, 'its signed part with a changed signature');
    await refused(t, `${h}.${p}.${s}=`, 'its signature padded');
    await refused(t, `${h}.${p}.${s.slice(0, -4)}`, 'its signature shortened');
    await refused(t, `${token}.x`, 'a fourth segment after it');
    await t.rejects(
      verifySessionToken('platform', token, other, issuer),
      new InvalidTokenError('malformed, or not signed by this service'),
      'under another secret',
    );
    await t.rejects(
      verifySessionToken('platform', token, secret, 'http://elsewhere.test'),
      new InvalidTokenError('malformed, or not signed by this service'),
      'for another issuer',
    );
    await t.rejects(
      verifySessionToken('dashboard', token, secret, issuer),
      new InvalidTokenError('malformed, or not signed by this service'),
      'as another kind',
    );
    // Its expiry passes (the clock moved on): refused, not remembered.
    const realNow = Date.now;
    Date.now = () => realNow() + 61_000;
    try {
      await refused(t, token, 'past its expiry', 'expired');
    } finally {
      Date.now = realNow;
    }
    t.equal(
      (await verifySessionTokenClaims('platform', token, secret, issuer)).subject,
      subject,
      'and valid again on the real clock',
    );
  },
);
