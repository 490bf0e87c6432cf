// TOTP two-factor for dashboard licenses (RFC 6238: SHA-1, 6 digits, 30 s).
// The secret is sealed under DATA_ENCRYPTION_KEY and bound to its license.
// Replays: the accepted time step is written with a guarded UPDATE, so a
// code is accepted once even when two requests race with it. Recovery codes
// are stored as SHA-256, shown once, and each is spent by a guarded UPDATE.
import type * as Otplib from 'otplib';
import { lazyRequire } from '../lazy-require.ts';
import { z } from 'zod';
import { canonicalEmail } from '../accounts/email.ts';
import { open, seal } from '../crypto/secretbox.ts';
import { normalizeRecoveryCode, recoveryCode, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods, type DatabasePool } from '../db/pool.ts';

/** otplib, loaded at the first TOTP check. */
const otplib = lazyRequire<typeof Otplib>('otplib');

export const TOTP_PERIOD_S = 30;
/** Codes of the previous and next step are accepted too (clock drift). */
export const TOTP_TOLERANCE_STEPS = 1;
export const RECOVERY_CODES_PER_SET = 8;
export const TOTP_ISSUER = 'Agent Platform Dashboard';
export const TOTP_CODE = /^\d{6}$/;
const RECOVERY_CODE = /^[A-Z0-9]{10}$/;

export class TotpStateError extends Error {
  override name = 'TotpStateError';
  constructor(public readonly reason: 'already_enabled' | 'not_pending' | 'not_enabled') {
    super(reason);
  }
}

const associatedData = (licenseId: string) => `dashboard-totp:${licenseId}`;

// bigint columns arrive as safe numbers (core/db/pool.ts); a time step is ~6e7 today.
const Step = z.number().int().nullable();

const State = z.object({
  id: z.string(),
  totp_secret: z.string().nullable(),
  totp_pending_secret: z.string().nullable(),
  enabled: z.boolean(),
  totp_last_step: Step,
});

async function loadState(db: CommonQueryMethods, licenseId: string) {
  return db.maybeOne(sql.type(State)`
    select id, totp_secret, totp_pending_secret, totp_enabled_at is not null as enabled, totp_last_step
    from dashboard_licenses where id = ${licenseId}`);
}

/**
 * The time step `code` belongs to, if it is valid within the tolerance and
 * later than `lastStep`; null otherwise.
 */
async function matchCode(secret: string, code: string, lastStep: number | null): Promise<number | null> {
  if (!TOTP_CODE.test(code)) return null;
  const epoch = Math.floor(Date.now() / 1000);
  // otplib refuses an afterTimeStep beyond the window; no code can pass then.
  if (lastStep !== null && lastStep >= Math.floor(epoch / TOTP_PERIOD_S) + TOTP_TOLERANCE_STEPS) return null;
  const result = await otplib().verify({
    secret,
    token: code,
    epoch,
    period: TOTP_PERIOD_S,
    epochTolerance: TOTP_TOLERANCE_STEPS * TOTP_PERIOD_S,
    ...(lastStep !== null ? { afterTimeStep: lastStep } : {}),
  });
  // The functional verify's result type also covers HOTP, which has no timeStep.
  return result.valid && 'timeStep' in result ? result.timeStep : null;
}

/** Records `step` as spent; false when the same or a later step was spent first. */
async function spendStep(
  db: CommonQueryMethods,
  licenseId: string,
  sealedSecret: string,
  step: number,
): Promise<boolean> {
  const row = await db.maybeOne(sql.type(z.object({ id: z.string() }))`
    update dashboard_licenses set totp_last_step = ${step}
    where id = ${licenseId} and totp_enabled_at is not null and totp_secret = ${sealedSecret}
      and (totp_last_step is null or totp_last_step < ${step})
    returning id`);
  return row !== null;
}

/** Replaces every recovery code of the license with a new set; returns them in clear, once. */
async function replaceRecoveryCodes(tx: CommonQueryMethods, licenseId: string): Promise<string[]> {
  const codes = Array.from({ length: RECOVERY_CODES_PER_SET }, () => recoveryCode());
  const hashes = codes.map((c) => sha256(normalizeRecoveryCode(c)));
  await tx.query(sql.unsafe`delete from dashboard_recovery_codes where license_id = ${licenseId}`);
  await tx.query(sql.unsafe`
    insert into dashboard_recovery_codes (license_id, code_hash)
    select ${licenseId}, h from unnest(${sql.array(hashes, 'text')}) as h`);
  return codes;
}

export type TotpSetup = { secret: string; otpauthUri: string; qrCodeDataUrl: string };

/** A new pending secret (replacing an unconfirmed one); 2FA stays off until confirmed. */
export async function beginTotpSetup(
  db: CommonQueryMethods,
  key: Buffer,
  license: { id: string; purchaserEmail: string },
): Promise<TotpSetup> {
  const { generateSecret, generateURI } = otplib();
  const secret = generateSecret();
  const otpauthUri = generateURI({
    issuer: TOTP_ISSUER,
    label: license.purchaserEmail,
    secret,
    period: TOTP_PERIOD_S,
    digits: 6,
  });
  // Loaded here, at the one place it draws: most processes never do.
  const { default: QRCode } = await import('qrcode');
  const qrCodeDataUrl = await QRCode.toDataURL(otpauthUri, { errorCorrectionLevel: 'M', margin: 2, width: 256 });
  const stored = await db.maybeOne(sql.type(z.object({ id: z.string() }))`
    update dashboard_licenses set totp_pending_secret = ${seal(key, secret, associatedData(license.id))}
    where id = ${license.id} and totp_enabled_at is null
    returning id`);
  if (!stored) throw new TotpStateError('already_enabled');
  return { secret, otpauthUri, qrCodeDataUrl };
}

/**
 * Confirms the pending secret with a code from the authenticator: 2FA is on
 * and the first set of recovery codes is returned. Null for a wrong code.
 */
export async function confirmTotpSetup(
  db: DatabasePool,
  key: Buffer,
  licenseId: string,
  code: string,
): Promise<string[] | null> {
  const state = await loadState(db, licenseId);
  if (state?.enabled) throw new TotpStateError('already_enabled');
  if (!state?.totp_pending_secret) throw new TotpStateError('not_pending');
  const pending = state.totp_pending_secret;
  const step = await matchCode(open(key, pending, associatedData(licenseId)), code, state.totp_last_step);
  if (step === null) return null;
  return db.transaction(async (tx) => {
    // Guarded on the pending secret we checked: a concurrent setup or verify wins, this one is refused.
    const enabled = await tx.maybeOne(sql.type(z.object({ id: z.string() }))`
      update dashboard_licenses
      set totp_secret = totp_pending_secret, totp_pending_secret = null, totp_enabled_at = now(), totp_last_step = ${step}
      where id = ${licenseId} and totp_enabled_at is null and totp_pending_secret = ${pending}
        and (totp_last_step is null or totp_last_step < ${step})
      returning id`);
    if (!enabled) return null;
    return replaceRecoveryCodes(tx, licenseId);
  });
}

/** Needs a live TOTP code (not a recovery code); null when the code is wrong or spent. */
export async function regenerateRecoveryCodes(
  db: DatabasePool,
  key: Buffer,
  licenseId: string,
  code: string,
): Promise<string[] | null> {
  const state = await loadState(db, licenseId);
  if (!state?.enabled || !state.totp_secret) throw new TotpStateError('not_enabled');
  const sealed = state.totp_secret;
  const step = await matchCode(open(key, sealed, associatedData(licenseId)), code, state.totp_last_step);
  if (step === null) return null;
  // Spending the step and replacing the codes commit together or not at all.
  return db.transaction(async (tx) =>
    (await spendStep(tx, licenseId, sealed, step)) ? replaceRecoveryCodes(tx, licenseId) : null,
  );
}

// Checked against when no license matches, so an unknown e-mail costs about
// as much time as a known one with a wrong code.
let decoySecret: string | undefined;

const ACTIVE_WITH_2FA = sql.fragment`
  l.status = 'active' and (l.expires_at is null or l.expires_at > now())
  and l.totp_enabled_at is not null and l.totp_secret is not null`;

export type SecondFactorLogin = { licenseId: string; method: 'totp' | 'recovery_code' };

/**
 * Second step of a dashboard login: the purchaser's e-mail and a TOTP code
 * or a recovery code. Returns the license it unlocks, or null, whatever was
 * wrong (unknown e-mail, wrong, spent or replayed code).
 */
export async function loginWithSecondFactor(
  db: DatabasePool,
  key: Buffer,
  email: string,
  code: string,
): Promise<SecondFactorLogin | null> {
  const typed = code.trim();
  // The purchaser's canonical address (core/accounts/email.ts): null matches no license.
  const purchaser = canonicalEmail(email);
  if (TOTP_CODE.test(typed)) {
    const candidates = await db.any(sql.type(
      z.object({ id: z.string(), totp_secret: z.string(), totp_last_step: Step }),
    )`
      select l.id, l.totp_secret, l.totp_last_step from dashboard_licenses l
      where canonical_email(l.purchaser_email) = ${purchaser} and ${ACTIVE_WITH_2FA}
      order by l.created_at, l.id`);
    if (candidates.length === 0) {
      decoySecret ??= otplib().generateSecret();
      await matchCode(decoySecret, typed, null);
    }
    for (const candidate of candidates) {
      const step = await matchCode(
        open(key, candidate.totp_secret, associatedData(candidate.id)),
        typed,
        candidate.totp_last_step,
      );
      if (step !== null && (await spendStep(db, candidate.id, candidate.totp_secret, step))) {
        return { licenseId: candidate.id, method: 'totp' };
      }
    }
    return null;
  }
  const normalized = normalizeRecoveryCode(typed);
  if (!RECOVERY_CODE.test(normalized)) return null;
  // `used_at is null` is re-checked after a concurrent spender's row lock is
  // released, so two requests with one code cannot both pass.
  const spent = await db.any(sql.type(z.object({ license_id: z.string() }))`
    update dashboard_recovery_codes c set used_at = now()
    from dashboard_licenses l
    where c.license_id = l.id and c.code_hash = ${sha256(normalized)} and c.used_at is null
      and canonical_email(l.purchaser_email) = ${purchaser} and ${ACTIVE_WITH_2FA}
    returning c.license_id`);
  const first = spent[0];
  return first ? { licenseId: first.license_id, method: 'recovery_code' } : null;
}
