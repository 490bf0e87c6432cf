// Data keys by id, so sealed values say which key sealed them and the master
// key can be rotated: new values use the current key, old ones still open
// with the previous key until they are re-sealed.
import { createHash } from 'node:crypto';
import type { Config } from '../config.ts';
import { open, seal } from './secretbox.ts';

export const keyIdOf = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 12);

export class Keyring {
  private readonly keys = new Map<string, Buffer>();
  readonly currentId: string;

  constructor(current: Buffer, previous?: Buffer) {
    this.currentId = keyIdOf(current);
    this.keys.set(this.currentId, current);
    if (previous) this.keys.set(keyIdOf(previous), previous);
  }

  static fromConfig(config: Config): Keyring {
    return new Keyring(config.secrets.DATA_ENCRYPTION_KEY, config.previousEncryptionKey);
  }

  seal(plaintext: string, associatedData: string): { keyId: string; ciphertext: string } {
    return { keyId: this.currentId, ciphertext: seal(this.keys.get(this.currentId)!, plaintext, associatedData) };
  }

  /** One text column instead of two: `<keyId>:<ciphertext>` (a key id has no colon). */
  sealPacked(plaintext: string, associatedData: string): string {
    const { keyId, ciphertext } = this.seal(plaintext, associatedData);
    return `${keyId}:${ciphertext}`;
  }

  openPacked(packed: string, associatedData: string): string {
    const at = packed.indexOf(':');
    return this.open(packed.slice(0, at), packed.slice(at + 1), associatedData);
  }

  open(keyId: string, ciphertext: string, associatedData: string): string {
    const key = this.keys.get(keyId);
    if (!key)
      throw new Error(`data key ${keyId} is not configured (set DATA_ENCRYPTION_KEY_PREVIOUS to the retired key)`);
    return open(key, ciphertext, associatedData);
  }
}
