import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

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
  return a.length === b.length && timingSafeEqual(a, b);
}

export type DigestEncoding = 'hex' | 'base64';

/**
 * Decodes a received signature to its bytes: hex in either case (a sender that prints
 * uppercase hex signs the same bytes), base64 with or without padding, base64url. Null when it
 * is not that encoding at all.
 */
export function decodeSignature(received: string, encoding: DigestEncoding): Buffer | null {
  if (encoding === 'hex') return /^(?:[0-9a-fA-F]{2})+$/.test(received) ? Buffer.from(received, 'hex') : null;
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(received)) return null;
  return Buffer.from(received.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

/**
 * Whether a received signature (text, in `encoding`) is the digest we computed: compared as
 * BYTES, in constant time, so that the case of hex digits or base64 padding never decides.
 */
export function digestMatches(expected: Buffer, received: string, encoding: DigestEncoding): boolean {
  const bytes = decodeSignature(received, encoding);
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
