// The identity provider's signing keys: ES256 through jose, each with a kid,
// kept in PostgreSQL (private half sealed) so every replica signs with the
// same key and verifies every live one. Rotation retires the current key:
// it signs nothing new but stays in the JWKS until the longest-lived token it
// signed has expired.
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { z } from 'zod';
import { open, seal } from '../crypto/secretbox.ts';
import { sql, type DatabasePool } from '../db/pool.ts';

export const SIGNING_ALG = 'ES256';

type VerificationKey = { kid: string; key: CryptoKey | Uint8Array };
type SigningKey = { kid: string; key: CryptoKey | Uint8Array };

const KeyRow = z.object({
  kid: z.string(),
  private_jwk: z.string(),
  public_jwk: z.record(z.string(), z.unknown()),
  retired_at: z.string().nullable(),
});

export class KeyStore {
  private signing: SigningKey | null = null;
  private verification = new Map<string, VerificationKey>();
  private publicJwks: JWK[] = [];
  private loadedAt = 0;
  private loading: Promise<void> | null = null;

  constructor(
    private readonly db: DatabasePool,
    private readonly encryptionKey: Buffer,
    /** Longest lifetime of anything signed (the assertion TTL), in seconds. */
    private readonly maxTokenLifetimeS: number,
  ) {}

  /** The key new tokens are signed with (created on first use). */
  async signingKey(): Promise<SigningKey> {
    if (!this.signing || Date.now() - this.loadedAt > 60_000) await this.reload();
    if (!this.signing) {
      await this.createKey();
      await this.reload();
    }
    return this.signing!;
  }

  /** jose key resolver: finds the key by kid, re-reading once if another replica rotated. */
  async verificationKey(kid: string | undefined): Promise<CryptoKey | Uint8Array> {
    if (!kid) throw new Error('token has no kid');
    if (!this.verification.has(kid) && Date.now() - this.loadedAt > 1_000) await this.reload();
    const found = this.verification.get(kid);
    if (!found) throw new Error('unknown signing key');
    return found.key;
  }

  /** Read fresh each time: a rotation by another process shows at once (clients cache it anyway). */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.reload();
    if (!this.signing) await this.signingKey();
    return { keys: this.publicJwks };
  }

  /** Retires the current key and makes a new one (ops/rotate-keys.ts). */
  async rotate(): Promise<string> {
    await this.db.query(sql.unsafe`
      update idp_signing_keys set retired_at = now(), expires_at = now() + make_interval(secs => ${this.maxTokenLifetimeS + 60})
      where retired_at is null`);
    const kid = await this.createKey();
    await this.reload();
    return kid;
  }

  private async createKey(): Promise<string> {
    return this.db.transaction(async (tx) => {
      // Two replicas starting together must not both create a key.
      await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('idp-signing-key'))`);
      const existing = await tx.maybeOneFirst(sql.type(z.object({ kid: z.string() }))`
        select kid from idp_signing_keys where retired_at is null order by created_at desc limit 1`);
      if (existing) return existing;
      const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
      const kid = randomUUID();
      const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: SIGNING_ALG, use: 'sig' };
      const privateJwk = JSON.stringify({ ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALG });
      await tx.query(sql.unsafe`
        insert into idp_signing_keys (kid, alg, private_jwk, public_jwk)
        values (${kid}, ${SIGNING_ALG}, ${seal(this.encryptionKey, privateJwk, `idp-key:${kid}`)}, ${sql.jsonb(publicJwk as never)})`);
      return kid;
    });
  }

  private async reload(): Promise<void> {
    this.loading ??= (async () => {
      const rows = await this.db.any(sql.type(KeyRow)`
        select kid, private_jwk, public_jwk, retired_at from idp_signing_keys
        where expires_at is null or expires_at > now()
        order by created_at desc`);
      const verification = new Map<string, VerificationKey>();
      let signing: SigningKey | null = null;
      for (const row of rows) {
        verification.set(row.kid, { kid: row.kid, key: await importJWK(row.public_jwk as JWK, SIGNING_ALG) });
        if (!signing && !row.retired_at) {
          const jwk = JSON.parse(open(this.encryptionKey, row.private_jwk, `idp-key:${row.kid}`)) as JWK;
          signing = { kid: row.kid, key: await importJWK(jwk, SIGNING_ALG) };
        }
      }
      this.verification = verification;
      this.signing = signing;
      this.publicJwks = rows.map((r) => r.public_jwk as JWK);
      this.loadedAt = Date.now();
    })().finally(() => (this.loading = null));
    return this.loading;
  }
}
