import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { VerificationError } from '@oncehook/shared';

export function hmacSha256(key: string | Buffer, ...parts: (string | Buffer)[]): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/**
 * Constant-time comparison of a signature we computed with one we were sent, both as
 * strings in the same encoding. Never `===`: its early exit leaks how many leading
 * characters matched. Unequal lengths are rejected up front (lengths are public anyway).
 */
export function signaturesEqual(expected: string, received: string): boolean {
  const a = Buffer.from(expected, 'utf8');
  const b = Buffer.from(received, 'utf8');
  // mutant: signature-length-only
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The check of senders that sign the raw body alone (GitHub hex, Shopify base64): the signature
 * must be the body's HMAC-SHA256 under one of the configured secrets (several while rotating),
 * else a 401 that names the header.
 */
export function requireBodySignature(secrets: readonly string[], rawBody: Buffer, encoding: 'hex' | 'base64', signature: string, header: string): void {
  if (secrets.some((secret) => signaturesEqual(hmacSha256(secret, rawBody).toString(encoding), signature))) return;
  throw new VerificationError(401, 'bad_signature', `${header} does not match the body with any configured secret`);
}

/** How a sender writes its signature: hex, standard base64 (padded), or base64url (unpadded: JWT-style in-house senders). */
export type DigestEncoding = 'hex' | 'base64' | 'base64url';

/**
 * Decodes a received signature to its bytes: hex in either case (a sender that prints
 * uppercase hex signs the same bytes); base64 only in its one standard form, the text every
 * sender that signs in base64 prints and its official library compares (the standard
 * alphabet, padded, canonical: decoding and encoding again gives the same text); base64url
 * only where the sender is declared so (an in-house sender's `encoding: "base64url"`), also
 * canonical, unpadded. A signature re-encoded in another form, without its padding or with
 * stray bits is refused: it is not
 * forged (it needs a valid signature), but a malleable signature is one more thing a replay
 * can vary. Null when it is not that encoding.
 */
export function decodeSignature(received: string, encoding: DigestEncoding): Buffer | null {
  if (encoding === 'hex') return /^(?:[0-9a-fA-F]{2})+$/.test(received) ? Buffer.from(received, 'hex') : null;
  if (encoding === 'base64url') {
    if (!/^[A-Za-z0-9_-]+$/.test(received)) return null;
    const bytes = Buffer.from(received, 'base64url');
    return bytes.toString('base64url') === received ? bytes : null;
  }
  // mutant: signature-base64url-accepted
  if (received.length === 0 || received.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(received)) return null;
  const bytes = Buffer.from(received, 'base64');
  return bytes.toString('base64') === received ? bytes : null;
}

/**
 * Whether a received signature (text, in `encoding`) is the digest we computed: compared as
 * BYTES, in constant time, so that the case of hex digits or base64 padding never decides.
 */
export function digestMatches(expected: Buffer, received: string, encoding: DigestEncoding): boolean {
  const bytes = decodeSignature(received, encoding);
  // mutant: scheme-hmac-any-digest
  return bytes !== null && bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

/**
 * Constant-time comparison of a configured secret (an admin token, a password) with what a
 * request carried: both are hashed first, so the comparison always covers 32 bytes and
 * neither the content nor the length of the secret leaks through timing.
 */
export function secretsEqual(configured: string, received: string): boolean {
  const a = createHash('sha256').update(configured, 'utf8').digest();
  const b = createHash('sha256').update(received, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/**
 * Whether a request may read /metrics: always when no METRICS_TOKEN is configured, else only
 * with `Authorization: Bearer <token>` (compared in constant time).
 */
export function metricsAuthorized(token: string | undefined, authorization: string | undefined): boolean {
  if (token === undefined) return true;
  const match = /^Bearer (.+)$/.exec(authorization ?? '');
  return match?.[1] !== undefined && secretsEqual(token, match[1]);
}
