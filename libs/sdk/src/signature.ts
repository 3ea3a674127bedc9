/**
 * The push signature (WIRE-PROTOCOL.md 2.1): `X-Ironflow-Signature: sha256=<hex HMAC-SHA256(key,
 * raw body)>`. One implementation, in `@ironflow/contracts`, shared with the engine that signs.
 */
export { SIGNATURE_HEADER, signPushBody, verifyPushSignature } from '@ironflow/contracts';
export type { SignatureCheck } from '@ironflow/contracts';
