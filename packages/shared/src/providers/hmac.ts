import { createHmac, timingSafeEqual } from 'node:crypto';

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
