import { createHmac, timingSafeEqual } from 'node:crypto';

/** Header that carries a push request's signature (WIRE-PROTOCOL.md 2.1), lowercase as Node reads it. */
export const SIGNATURE_HEADER = 'x-ironflow-signature';

/**
 * Signs a raw push body: returns the header value `sha256=<lowercase hex HMAC-SHA256(key, body)>`.
 * The HMAC covers the exact body bytes; there is no timestamp (WIRE-PROTOCOL.md 2.1). The engine
 * signs every push request this way when it has a signing key; `serve()` verifies.
 */
export function signPushBody(signingKey: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', signingKey).update(body).digest('hex')}`;
}

/** Outcome of {@link verifyPushSignature}: `ok`, or why not. */
export type SignatureCheck = 'ok' | 'missing' | 'invalid';

/**
 * Checks `X-Ironflow-Signature` against the raw body: `missing` when the header is absent or empty,
 * `invalid` for a wrong prefix, a digest that is not 32 bytes of hex (either case) or a mismatch
 * (compared in constant time).
 */
export function verifyPushSignature(signingKey: string, body: Buffer, header: string | undefined): SignatureCheck {
  if (header === undefined || header === '') return 'missing';
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(header.trim());
  if (!match) return 'invalid';
  const given = Buffer.from(match[1], 'hex');
  const expected = createHmac('sha256', signingKey).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected) ? 'ok' : 'invalid';
}
