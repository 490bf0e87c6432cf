import { z } from 'zod';
import { RECOVERY_CODES_PER_SET } from '../../../core/dashboard/totp.ts';

const TotpCode = z
  .string()
  .regex(/^\d{6}$/, 'expected the 6-digit code from the authenticator app')
  .describe('6-digit TOTP code');

export const LicenseLoginBody = z
  .object({ licenseKey: z.string().min(8).max(256).describe('The license key (`lic_...`) from the purchase') })
  .meta({ id: 'DashboardLoginRequest' });

export const DashboardSession = z
  .object({
    token: z.string().describe('Dashboard JWT; send as `Authorization: Bearer <token>`'),
    tokenType: z.literal('Bearer'),
    expiresIn: z.int().describe('Seconds until the token expires; then log in again'),
  })
  .meta({ id: 'DashboardSession' });

export const TotpRequired = z
  .object({
    totpRequired: z.literal(true),
    message: z.string().describe('Next step: POST /api/dashboard/auth/totp-login with the purchaser e-mail and a code'),
  })
  .meta({ id: 'DashboardTotpRequired' });

export const LicenseLoginResult = z.union([DashboardSession, TotpRequired]).meta({
  id: 'DashboardLoginResult',
  description: 'A token, or a signal that the license has two-factor authentication on',
});

export const TotpLoginBody = z
  .object({
    email: z.email().max(320).describe('Purchaser e-mail of the license (case-insensitive)'),
    code: z
      .string()
      .min(6)
      .max(32)
      .regex(/^[0-9A-Za-z\s-]+$/, 'expected a 6-digit code or a recovery code')
      .describe('6-digit TOTP code, or a recovery code (XXXXX-XXXXX; dashes and case ignored)'),
  })
  .meta({ id: 'DashboardTotpLoginRequest' });

export const DashboardMe = z
  .object({
    id: z.uuid(),
    keyHint: z.string().describe('Last four characters of the license key'),
    purchaserEmail: z.string(),
    plan: z.string().describe('pro or enterprise'),
    status: z.enum(['active', 'revoked', 'expired']),
    expiresAt: z.iso.datetime().nullable(),
    twoFactorEnabled: z.boolean(),
    recoveryCodesRemaining: z.int().min(0),
    features: z.array(z.string()).describe("Feature entitlements: the plan features with this license's adjustments"),
  })
  .meta({ id: 'DashboardLicense' });

export const TotpSetupResult = z
  .object({
    secret: z.string().describe('Base32 secret, for typing into an authenticator by hand'),
    otpauthUri: z.string().describe('otpauth://totp/... URI'),
    qrCodeDataUrl: z.string().startsWith('data:image/png;base64,').describe('The URI as a PNG QR code'),
  })
  .meta({ id: 'DashboardTotpSetup' });

export const TotpCodeBody = z.object({ code: TotpCode }).meta({ id: 'DashboardTotpCode' });

const RecoveryCodeList = z
  .array(z.string())
  .length(RECOVERY_CODES_PER_SET)
  .describe('One-time recovery codes, shown only now; each replaces a TOTP code once');

export const TotpEnabled = z
  .object({ enabled: z.literal(true), recoveryCodes: RecoveryCodeList })
  .meta({ id: 'DashboardTotpEnabled' });

export const RecoveryCodes = z.object({ recoveryCodes: RecoveryCodeList }).meta({ id: 'DashboardRecoveryCodes' });
