import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Parses `IRONFLOW_SECRETS_KEY`: exactly 32 bytes, written as 64 hex digits or as base64 (44
 * characters with padding; base64url accepted). Throws an Error saying what is wrong (never
 * echoing the value).
 */
export function parseSecretsKey(text: string): Buffer {
  const value = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) {
    const key = Buffer.from(value.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  throw new Error('IRONFLOW_SECRETS_KEY must be 32 bytes: 64 hex digits or 44 base64 characters (e.g. `openssl rand -base64 32`)');
}

/**
 * AES-256-GCM over secret values (issue 9, item 4). Each value gets a fresh 96-bit IV; the
 * secret's identity (`project/env/name`) is the additional authenticated data, so a ciphertext
 * copied onto another secret's row does not decrypt. Stored form: `v1:<base64(iv | tag | ciphertext)>`.
 */
export class SecretCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('a secrets key is 32 bytes');
  }

  encrypt(identity: string, value: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(identity, 'utf8'));
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
  }

  /** Throws when the ciphertext was made with another key, for another identity, or was altered. */
  decrypt(identity: string, stored: string): string {
    if (!stored.startsWith(`${VERSION}:`)) throw new Error('unknown secret format');
    const raw = Buffer.from(stored.slice(VERSION.length + 1), 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new Error('secret ciphertext is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(identity, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
