// Time-ordered ids (UUID version 7, RFC 9562) for rows written on the hot
// path (jobs, chat messages): a new id sorts after the ids made before it,
// so its primary-key entry lands on the index's rightmost page instead of a
// random one, and a checkpoint has fewer pages to write whole. The first 48
// bits are the milliseconds since 1970; the next 12 count ids made within one
// millisecond in this process (so ids of one process stay in order), and the
// other 62 are random. They are no more guessable than needed: every read of
// a job or message is checked against its tenant.
import { randomFillSync } from 'node:crypto';

const RANDOM_POOL = 4096;
const pool = Buffer.allocUnsafe(RANDOM_POOL);
let poolOffset = RANDOM_POOL;
let lastMs = 0;
let sequence = 0;

function randomBytes(n: number): Buffer {
  if (poolOffset + n > RANDOM_POOL) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const out = pool.subarray(poolOffset, poolOffset + n);
  poolOffset += n;
  return out;
}

/** A new UUIDv7, e.g. `019bd0a2-5c1e-7a3b-9f00-4c2d8e1b7a55`. */
export function timeOrderedId(now: number = Date.now()): string {
  let ms = now;
  if (ms <= lastMs) {
    ms = lastMs;
    sequence++;
    if (sequence > 0xfff) {
      // More than 4,096 ids in one millisecond: borrow the next one.
      ms = ++lastMs;
      sequence = 0;
    }
  } else {
    lastMs = ms;
    sequence = 0;
  }
  const bytes = Buffer.allocUnsafe(16);
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  randomBytes(8).copy(bytes, 8);
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
