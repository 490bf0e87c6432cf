// An invitation link proves a mailbox only when nobody but its owner saw
// it. With SMTP_URL set the Admin's answer has no link, says it was sent
// and to whom; the e-mail (through a real local SMTP server and a real
// worker) carries it, and an account made from it is verified, so a later
// external login with that e-mail links to it. The Admin re-sends (a new
// link, the old one dead) and revokes. Without SMTP the Admin sees the
// link; the account made from it is unverified and an external login by
// that e-mail is refused and creates nothing, until the owner accepts,
// signed in, an invitation that went only to the mailbox.
import pino from 'pino';
import t from 'tap';
import { z } from 'zod';
import { sql } from '../../../../core/db/pool.ts';
import { startWorker } from '../../../../workers/worker.ts';
import { buildTestApp } from '../../../helpers/app.ts';
import { testConfig } from '../../../helpers/config.ts';
import { createTestDatabase, rowCount } from '../../../helpers/db.ts';
import { createMember, type Member } from '../../../helpers/fixtures.ts';
import { startOidcServer } from '../../../helpers/oidc-server.ts';
import { startSmtpServer } from '../../../helpers/smtp-server.ts';
import { waitFor } from '../../../helpers/wait.ts';

const PASSWORD = 'a good long passphrase';
const smtp = await startSmtpServer(t);
const op = await startOidcServer(t, {
  clients: [{ client_id: 'platform-alt', client_secret: 'platform-alt-secret-0123456789abcdef', redirect_uris: [] }],
});
const databaseUrl = await createTestDatabase(t);
const altidp = { ALTIDP_ISSUER: op.issuer, ALTIDP_CLIENT_ID: 'platform-alt' };
const mailing = { SMTP_URL: smtp.url, MAIL_FROM: 'Invitations <invites@example.test>' };
const mail = await buildTestApp(t, databaseUrl, { ...altidp, ...mailing });
const plain = await buildTestApp(t, databaseUrl, altidp);
const { db } = mail;
const worker = await startWorker({
  config: testConfig(databaseUrl, mailing),
  databaseUrl,
  logger: pino({ level: 'silent' }),
});
t.teardown(() => worker.stop());

let ip = 0;
const from = () => `10.9.${Math.floor(++ip / 250)}.${ip % 250}`;
const as = (m: Member) => ({ authorization: `Bearer ${m.token}`, 'x-tenant-id': m.tenantId });
const tokenOf = (link: string) => link.slice(link.indexOf('#') + 1);

const invite = (via: typeof mail, admin: Member, email: string) =>
  via.app.inject({ method: 'POST', url: '/api/tenants/invitations', headers: as(admin), payload: { email } });
const resend = (via: typeof mail, admin: Member, id: string) =>
  via.app.inject({ method: 'POST', url: `/api/tenants/invitations/${id}/resend`, headers: as(admin) });
const accept = (payload: Record<string, string>, headers: Record<string, string> = {}) =>
  mail.app.inject({ method: 'POST', url: '/api/invitations/accept', payload, headers, remoteAddress: from() });

/** The link of the `n`th e-mail to `email`, once the worker sent it. */
async function mailedLink(email: string, n = 1): Promise<string> {
  const mails = await waitFor(`e-mail ${n} to ${email}`, async () => smtp.to(email).length >= n && smtp.to(email));
  const link = /http:\/\/\S+\/invitations\/accept#inv_[\w-]+/.exec(mails[n - 1]!.text)?.[0];
  if (!link) throw new Error(`no link in the e-mail to ${email}`);
  return link;
}

/** Signs in through altidp with an identity token whose e-mail the provider verified. */
async function externalLogin(email: string, subject: string) {
  const now = Math.floor(Date.now() / 1000);
  const identityToken = await op.sign({
    iss: op.issuer,
    aud: 'platform-alt',
    sub: subject,
    email,
    email_verified: true,
    iat: now,
    exp: now + 600,
  });
  return mail.app.inject({
    method: 'POST',
    url: '/api/auth/altidp',
    payload: { identityToken },
    remoteAddress: from(),
  });
}

const verified = (email: string) =>
  db.oneFirst(sql.type(z.object({ v: z.boolean() }))`select email_verified as v from users where email = ${email}`);

t.test('with SMTP the link goes only to the mailbox; the account made from it is verified and links', async (t) => {
  const admin = await createMember(db, 'admin');
  const email = 'grace-mail@example.test';
  const res = await invite(mail, admin, email);
  t.equal(res.statusCode, 201, res.body);
  const body = res.json();
  t.equal(body.link, null, 'no link in the answer');
  t.equal(body.emailed, true);
  t.match(body.message, /sent by e-mail to grace-mail@example\.test only/, 'says it was sent, and to whom');
  t.notMatch(res.body, /inv_/, 'no token anywhere in the answer');

  const link = await mailedLink(email);
  t.match(link, /\/invitations\/accept#inv_/, 'the e-mail carries the link');
  const accepted = await accept({ token: tokenOf(link), name: 'Grace', password: PASSWORD });
  t.equal(accepted.statusCode, 200, accepted.body);
  t.equal(await verified(email), true, 'the account proved its mailbox');

  const login = await externalLogin(email, 'alt-grace');
  t.equal(login.statusCode, 200, login.body);
  t.match(login.json(), { newUser: false, user: { id: accepted.json().session.user.id } }, 'linked to that account');
});

t.test('the Admin re-sends (a new link, the old one dead) and revokes', async (t) => {
  const admin = await createMember(db, 'admin');
  const email = 'hedy@example.test';
  const created = (await invite(mail, admin, email)).json();
  const first = await mailedLink(email);

  const again = await resend(mail, admin, created.id);
  t.equal(again.statusCode, 200, again.body);
  t.match(again.json(), { id: created.id, email, emailStatus: 'queued' });
  t.match(again.json().message, /new link was sent by e-mail to hedy@example\.test only/);
  t.notMatch(again.body, /inv_/, 'no link in the answer');
  const second = await mailedLink(email, 2);
  t.not(second, first, 'a new link');
  const old = await accept({ token: tokenOf(first), name: 'Hedy', password: PASSWORD });
  t.equal(old.statusCode, 404, 'the first link stopped working');

  const audit = await mail.app.inject({ url: '/api/tenants/audit', headers: as(admin) });
  t.ok(
    audit.json().items.some((i: { action: string }) => i.action === 'invitation_resent'),
    'the re-send is audited',
  );
  const missing = await resend(mail, admin, '00000000-0000-4000-8000-000000000000');
  t.equal(missing.statusCode, 404);

  const revoked = await mail.app.inject({
    method: 'DELETE',
    url: `/api/tenants/invitations/${created.id}`,
    headers: as(admin),
  });
  t.equal(revoked.statusCode, 204);
  const late = await accept({ token: tokenOf(second), name: 'Hedy', password: PASSWORD });
  t.equal(late.statusCode, 410);
  t.equal(late.json().error, 'invitation_revoked', 'the revoked link is refused');
  const resentRevoked = await resend(mail, admin, created.id);
  t.equal(resentRevoked.statusCode, 409);
  t.equal(resentRevoked.json().error, 'invitation_revoked');
  t.equal(smtp.to(email).length, 2, 'nothing more was mailed');
});

t.test(
  'without SMTP the Admin sees the link; that account is unverified and no external login links to it',
  async (t) => {
    const admin = await createMember(db, 'admin');
    const email = 'victim@example.test';
    const res = await invite(plain, admin, email);
    t.equal(res.statusCode, 201, res.body);
    t.match(res.json(), { emailed: false, link: /#inv_/ }, 'the link is shown');
    const noMail = await resend(plain, admin, res.json().id);
    t.equal(noMail.statusCode, 409);
    t.equal(noMail.json().error, 'email_not_configured', 'nothing to re-send without SMTP');

    // Whoever saw the link makes the account (here: the Admin, for an address they do not own).
    const made = await accept({ token: tokenOf(res.json().link), name: 'Not the owner', password: PASSWORD });
    t.equal(made.statusCode, 200, made.body);
    t.equal(await verified(email), false, 'unverified');

    const [users, identities] = [await rowCount(db, 'users'), await rowCount(db, 'user_identities')];
    const login = await externalLogin(email, 'alt-victim');
    t.equal(login.statusCode, 403, login.body);
    t.equal(login.json().error, 'account_email_unverified');
    t.match(login.json().message, /not linked/, 'says why');
    t.equal(await rowCount(db, 'users'), users, 'no account created');
    t.equal(await rowCount(db, 'user_identities'), identities, 'nothing linked');

    // The owner proves the mailbox: accepting, signed in, an invitation that went only to it.
    const other = await createMember(db, 'admin');
    t.equal((await invite(mail, other, email)).statusCode, 201);
    const link = await mailedLink(email);
    const joined = await accept({ token: tokenOf(link) }, { authorization: `Bearer ${made.json().session.token}` });
    t.equal(joined.statusCode, 200, joined.body);
    t.equal(await verified(email), true, 'proved');
    const now = await externalLogin(email, 'alt-victim');
    t.equal(now.statusCode, 200, now.body);
    t.equal(now.json().user.id, made.json().session.user.id, 'linked now');
  },
);

t.test('a link an Admin saw stops working once the invitation is re-sent by e-mail', async (t) => {
  const admin = await createMember(db, 'admin');
  const email = 'ida@example.test';
  const shown = (await invite(plain, admin, email)).json();
  t.equal((await resend(mail, admin, shown.id)).statusCode, 200);
  const dead = await accept({ token: tokenOf(shown.link), name: 'Ida', password: PASSWORD });
  t.equal(dead.statusCode, 404, 'the shown link no longer works');
  const link = await mailedLink(email);
  const accepted = await accept({ token: tokenOf(link), name: 'Ida', password: PASSWORD });
  t.equal(accepted.statusCode, 200, accepted.body);
  t.equal(await verified(email), true, 'the mailed link proves the mailbox');
});
