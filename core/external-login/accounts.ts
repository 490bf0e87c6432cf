// Who an external login is. The rule, in order:
//   1. a known (provider, subject) is that identity's user;
//   2. otherwise, when the provider vouches that the e-mail is verified, the
//      account with that e-mail gets this identity linked (or, with none, a
//      new account is made for it);
//   3. an unverified or missing e-mail creates and links nothing: linking on
//      an e-mail nobody verified would hand an account to whoever typed it;
//   4. nor is a login linked to an account whose own e-mail nobody proved (a
//      password account made from an invitation link its Admin saw): that
//      would hand the login to whoever made the account (a pre-hijack). It
//      is refused and nothing is created; the account's owner proves the
//      mailbox first (users.email_verified).
import { z } from 'zod';
import { sql, type CommonQueryMethods, type DatabaseTransactionConnection } from '../db/pool.ts';
import { canonicalEmail } from '../accounts/email.ts';
import { UserRow } from '../accounts/users.ts';
import { flattenName, NAME_MAX_LENGTH } from '../names.ts';
import { ExternalLoginError } from './clients.ts';
import type { ExternalProvider } from './settings.ts';

export type ExternalClaims = {
  provider: ExternalProvider;
  subject: string;
  email?: string;
  emailVerified: boolean;
  name?: string;
};

export type ExternalSignIn = { user: UserRow; newUser: boolean; linked: boolean };

const userRow = sql.type(UserRow);
const Linkable = UserRow.extend({ email_verified: z.boolean() });
const UserId = z.object({ user_id: z.string() });

/** Providers send email_verified as a boolean or as the string "true". */
export const verifiedFlag = (value: unknown) => value === true || value === 'true';

export async function signInExternal(
  tx: DatabaseTransactionConnection,
  claims: ExternalClaims,
): Promise<ExternalSignIn> {
  // Two first logins of one subject at once: the second waits and finds the first's link.
  await tx.query(
    sql.unsafe`select pg_advisory_xact_lock(hashtextextended(${`external-login|${claims.provider}|${claims.subject}`}, 0))`,
  );
  const known = await tx.maybeOneFirst(sql.type(UserId)`
    update user_identities set
      email = coalesce(${claims.email ?? null}, email),
      email_verified = ${claims.email ? claims.emailVerified : sql.fragment`email_verified`},
      last_login_at = now(), updated_at = now()
    where provider = ${claims.provider} and subject = ${claims.subject}
    returning user_id`);
  if (known)
    return {
      user: await tx.one(
        userRow`select id, email, display_name, avatar_url, is_operator from users where id = ${known}`,
      ),
      newUser: false,
      linked: false,
    };

  if (!claims.email) {
    throw new ExternalLoginError(
      403,
      'email_required',
      'The provider shared no e-mail address; allow sharing it and sign in again.',
    );
  }
  if (!claims.emailVerified) {
    throw new ExternalLoginError(
      403,
      'email_not_verified',
      'The provider has not verified this e-mail address; verify it there and sign in again. Nothing was created or linked.',
    );
  }
  // Linked by the canonical address (core/accounts/email.ts), as a password login finds its account.
  const key = canonicalEmail(claims.email);
  if (!key) {
    throw new ExternalLoginError(
      403,
      'email_unsupported',
      `The provider's e-mail address ${JSON.stringify(claims.email)} is not one an account here can have (plain ASCII letters, digits and punctuation); nothing was created or linked.`,
    );
  }
  let user = await tx.maybeOne(sql.type(Linkable)`
    select id, email, display_name, avatar_url, is_operator, email_verified from users where email_key = ${key} for update`);
  let newUser = false;
  if (!user) {
    const name = claims.name ? flattenName(claims.name).slice(0, NAME_MAX_LENGTH) || null : null;
    const inserted = await tx.maybeOne(sql.type(Linkable)`
      insert into users (email, display_name) values (${claims.email}, ${name})
      on conflict do nothing
      returning id, email, display_name, avatar_url, is_operator, email_verified`);
    newUser = inserted !== null;
    // A password account with this e-mail was created a moment ago: link to it (if proved).
    user =
      inserted ??
      (await tx.one(sql.type(Linkable)`
        select id, email, display_name, avatar_url, is_operator, email_verified from users where email_key = ${key}`));
  }
  if (!user.email_verified) {
    throw new ExternalLoginError(
      403,
      'account_email_unverified',
      `An account for ${claims.email} exists, made from an invitation link that was shown to a workspace's Admin, so nobody proved it owns this mailbox: this login is not linked to it, and nothing was created. ` +
        "If the account is yours, sign in with its password; this login links once you prove the mailbox by accepting, signed in, an invitation e-mailed to it. If it is not yours, ask the platform's operator to remove it.",
    );
  }
  const { email_verified: _verified, ...account } = user;
  await tx.query(sql.unsafe`
    insert into user_identities (user_id, provider, subject, email, email_verified, last_login_at)
    values (${user.id}, ${claims.provider}, ${claims.subject}, ${claims.email}, true, now())`);
  return { user: account, newUser, linked: !newUser };
}

/** Whether the user could still sign in after losing this identity. */
export async function hasOtherSignIn(db: CommonQueryMethods, userId: string): Promise<boolean> {
  return db.exists(sql.unsafe`
    select 1 from user_identities i join users u on u.id = i.user_id
    where i.user_id = ${userId} and (i.provider <> 'password' or u.password_hash is not null)`);
}
