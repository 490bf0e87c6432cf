// The check the Slack and webhook channels share: a timestamped HMAC over the
// raw body, fresh within five minutes, compared in constant time.
import { constantTimeEqual } from '../crypto/tokens.ts';
import type { InboundRequest } from './types.ts';

const TOLERANCE_S = 300;

export function verifyTimestampedSignature(
  secret: string | undefined,
  request: InboundRequest,
  names: { timestamp: string; signature: string },
  sign: (secret: string, timestamp: string, raw: Buffer) => string,
): boolean {
  const timestamp = request.headers[names.timestamp];
  const given = request.headers[names.signature];
  if (!secret || typeof timestamp !== 'string' || typeof given !== 'string' || !/^\d{1,12}$/.test(timestamp))
    return false;
  if (Math.abs(request.nowMs / 1000 - Number(timestamp)) > TOLERANCE_S) return false;
  return constantTimeEqual(given, sign(secret, timestamp, request.rawBody));
}
