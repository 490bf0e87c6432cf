// Dashboard licenses: a random key is sold to a purchaser and unlocks the
// dashboard. The key is shown once at creation; only its SHA-256 is stored
// (it is high-entropy, so a fast hash is the right lookup) plus the last four
// characters, so a person can tell their keys apart.
import { z } from 'zod';
import { randomToken, sha256 } from '../crypto/tokens.ts';
import { sql, type CommonQueryMethods } from '../db/pool.ts';

/** What each plan unlocks. Stored per-license features adjust this list. */
export const PLAN_FEATURES = {
  pro: ['dashboards', 'exports', 'scheduled_reports', 'api_access'],
  enterprise: [
    'dashboards',
    'exports',
    'scheduled_reports',
    'api_access',
    'sso',
    'audit_log',
    'custom_branding',
    'priority_support',
  ],
} as const satisfies Record<string, readonly string[]>;
export type Plan = keyof typeof PLAN_FEATURES;
export const PLANS = Object.keys(PLAN_FEATURES) as Plan[];

// A stored feature `name` grants it on top of the plan; `-name` withdraws a
// plan feature from this one license (a negotiated contract, a trial limit).
export const FEATURE_ADJUSTMENT = /^-?[a-z][a-z0-9_]{0,63}$/;

export type License = {
  id: string;
  keyHint: string;
  purchaserEmail: string;
  plan: string;
  features: string[];
  /** `expired` also when the row says active but expires_at has passed. */
  status: 'active' | 'revoked' | 'expired';
  expiresAt: string | null;
  twoFactorEnabled: boolean;
  /** Active and not past its expiry, by the database clock. */
  active: boolean;
};

const Row = z.object({
  id: z.string(),
  key_hint: z.string(),
  purchaser_email: z.string(),
  plan: z.string(),
  features: z.unknown(),
  status: z.enum(['active', 'revoked', 'expired']),
  expires_at: z.string().nullable(),
  two_factor_enabled: z.boolean(),
  active: z.boolean(),
});

// Shared select list: the effective status is computed in SQL so that every
// replica judges expiry by the same clock.
const COLUMNS = sql.fragment`
  id, key_hint, purchaser_email, plan, features,
  case when status = 'active' and expires_at <= now() then 'expired' else status end as status,
  expires_at, totp_enabled_at is not null as two_factor_enabled,
  (status = 'active' and (expires_at is null or expires_at > now())) as active`;

const toLicense = (row: z.infer<typeof Row>): License => ({
  id: row.id,
  keyHint: row.key_hint,
  purchaserEmail: row.purchaser_email,
  plan: row.plan,
  features: Array.isArray(row.features) ? row.features.filter((f): f is string => typeof f === 'string') : [],
  status: row.status,
  expiresAt: row.expires_at,
  twoFactorEnabled: row.two_factor_enabled,
  active: row.active,
});

export type NewLicense = { purchaserEmail: string; plan?: Plan; features?: string[]; expiresAt?: Date | null };

/** Creates a license; the key in the result exists nowhere else afterwards. */
export async function createLicense(db: CommonQueryMethods, input: NewLicense): Promise<{ id: string; key: string }> {
  const plan = input.plan ?? 'pro';
  if (!PLANS.includes(plan)) throw new Error(`unknown plan ${plan}`);
  const features = input.features ?? [];
  const bad = features.find((f) => !FEATURE_ADJUSTMENT.test(f));
  if (bad !== undefined) throw new Error(`invalid feature adjustment ${JSON.stringify(bad)}`);
  const key = randomToken('lic_');
  const id = await db.oneFirst(sql.type(z.object({ id: z.string() }))`
    insert into dashboard_licenses (key_hash, key_hint, purchaser_email, plan, features, expires_at)
    values (${sha256(key)}, ${key.slice(-4)}, ${input.purchaserEmail.trim()}, ${plan}, ${sql.jsonb(features)},
            ${input.expiresAt ? input.expiresAt.toISOString() : null})
    returning id`);
  return { id, key };
}

/** The license a key belongs to, whatever its status (callers check `active`). */
export async function findLicenseByKey(db: CommonQueryMethods, key: string): Promise<License | null> {
  const row = await db.maybeOne(
    sql.type(Row)`select ${COLUMNS} from dashboard_licenses where key_hash = ${sha256(key)}`,
  );
  return row ? toLicense(row) : null;
}

export async function findLicenseById(db: CommonQueryMethods, id: string): Promise<License | null> {
  const row = await db.maybeOne(sql.type(Row)`select ${COLUMNS} from dashboard_licenses where id = ${id}`);
  return row ? toLicense(row) : null;
}

/** The plan's features with this license's adjustments applied, sorted. */
export function entitlementsOf(license: Pick<License, 'plan' | 'features'>): string[] {
  const granted = new Set<string>(PLAN_FEATURES[license.plan as Plan] ?? []);
  for (const adjustment of license.features) {
    if (!FEATURE_ADJUSTMENT.test(adjustment)) continue;
    if (adjustment.startsWith('-')) granted.delete(adjustment.slice(1));
    else granted.add(adjustment);
  }
  return [...granted].sort();
}

export async function recoveryCodesRemaining(db: CommonQueryMethods, licenseId: string): Promise<number> {
  return db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from dashboard_recovery_codes where license_id = ${licenseId} and used_at is null`);
}
