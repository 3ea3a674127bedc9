import { randomBytes } from 'node:crypto';
import { SecretCipher, parseSecretsKey } from './secret-cipher';

describe('secret cipher (AES-256-GCM)', () => {
  const key = randomBytes(32);
  const cipher = new SecretCipher(key);

  it('round-trips a value, with a fresh IV each time, never storing the plain text', () => {
    const a = cipher.encrypt('p/e/STRIPE', 'sk_live_🔑');
    const b = cipher.encrypt('p/e/STRIPE', 'sk_live_🔑');
    expect(a).toMatch(/^v1:[A-Za-z0-9+/]+=*$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('sk_live');
    expect(cipher.decrypt('p/e/STRIPE', a)).toBe('sk_live_🔑');
  });

  it('refuses a ciphertext moved onto another secret, made with another key, or altered', () => {
    const stored = cipher.encrypt('p/e/A', 'value');
    expect(() => cipher.decrypt('p/e/B', stored)).toThrow();
    expect(() => new SecretCipher(randomBytes(32)).decrypt('p/e/A', stored)).toThrow();
    const raw = Buffer.from(stored.slice(3), 'base64');
    raw[raw.length - 1] ^= 1;
    expect(() => cipher.decrypt('p/e/A', `v1:${raw.toString('base64')}`)).toThrow();
    expect(() => cipher.decrypt('p/e/A', 'v2:abc')).toThrow('unknown secret format');
  });

  it('parses IRONFLOW_SECRETS_KEY as 64 hex digits or base64 of 32 bytes, and refuses anything else without echoing it', () => {
    expect(parseSecretsKey(key.toString('hex'))).toEqual(key);
    expect(parseSecretsKey(key.toString('base64'))).toEqual(key);
    expect(parseSecretsKey(key.toString('base64url'))).toEqual(key);
    for (const bad of ['', 'short', randomBytes(16).toString('hex'), randomBytes(31).toString('base64'), 'g'.repeat(64)]) {
      let message = '';
      try {
        parseSecretsKey(bad);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toContain('IRONFLOW_SECRETS_KEY must be 32 bytes');
      if (bad.length > 4) expect(message).not.toContain(bad);
    }
  });
});
