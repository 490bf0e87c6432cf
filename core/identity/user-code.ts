// The user code of the claim ceremony (RFC 8628 §6.1): eight characters from
// an alphabet without vowels or look-alikes, shown as XXXX-XXXX. The person
// reads it off the claim page and gives it to the agent; only its SHA-256 is
// stored. Case, dashes and spaces are ignored when the agent sends it back.
import { randomBytes } from 'node:crypto';
import { sha256 } from '../crypto/tokens.ts';

export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;
// 256 = 12 * 20 + 16: bytes from 240 up would favour the first 16 letters.
const UNBIASED_LIMIT = 256 - (256 % USER_CODE_ALPHABET.length);

export function generateUserCode(): string {
  const chars: string[] = [];
  while (chars.length < USER_CODE_LENGTH) {
    for (const byte of randomBytes(USER_CODE_LENGTH * 2)) {
      if (byte >= UNBIASED_LIMIT) continue;
      chars.push(USER_CODE_ALPHABET[byte % USER_CODE_ALPHABET.length]!);
      if (chars.length === USER_CODE_LENGTH) break;
    }
  }
  return `${chars.slice(0, 4).join('')}-${chars.slice(4).join('')}`;
}

export const normalizeUserCode = (code: string) => code.replace(/[\s-]/g, '').toUpperCase();

export const hashUserCode = (code: string) => sha256(normalizeUserCode(code));
