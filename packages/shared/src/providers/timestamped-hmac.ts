/**
 * The signature Stripe and Paddle share: one header listing a timestamp and one or more hex
 * HMAC-SHA256 signatures (`t=<unix>,v1=<hex>[,v1=...]`; `ts=<unix>;h1=<hex>`) over
 * `<timestamp><separator><raw body>`. Any listed signature matching any configured secret
 * accepts (a secret rolling, or several endpoints); the timestamp is checked both ways.
 */
import { VerificationError } from '../errors.js';
import { hmacSha256, signaturesEqual } from './hmac.js';
import { checkTimestamp, parseTimestampedSignatures, requireHeader, type DeliveryRequest } from './types.js';

export interface TimestampedHmacFormat {
  /** The header (`Stripe-Signature`). */
  header: string;
  /** Between the list's elements (`,` / `;`). */
  separator: string;
  timestampKey: string;
  signatureKey: string;
  /** Between the timestamp and the body in the signed content (`.` / `:`). */
  signedSeparator: string;
  /** Added to the "no signature" message (` (v0 is not accepted)`). */
  note?: string;
}

/** The header's timestamp and signatures; a 400 naming the header when it is malformed. */
export function parseTimestampedHmacHeader(format: TimestampedHmacFormat, header: DeliveryRequest['header']): { timestamp: number; signatures: string[] } {
  return parseTimestampedSignatures(requireHeader({ header }, format.header), { name: format.header, ...format });
}

/** precheck (headers, before the body) and verify (the bytes) for one source's secrets and tolerance. */
export function timestampedHmacVerifier(format: TimestampedHmacFormat, secrets: readonly string[], toleranceSeconds: number) {
  const where = `${format.header} timestamp`;
  return {
    precheck(header: DeliveryRequest['header'], now: Date): void {
      checkTimestamp(parseTimestampedHmacHeader(format, header).timestamp, now, toleranceSeconds, where);
    },
    /** Throws 401 unless a listed signature matches the body with a configured secret and the timestamp is in tolerance. */
    verify(request: DeliveryRequest): void {
      const { timestamp, signatures } = parseTimestampedHmacHeader(format, request.header);
      const valid = secrets.some((secret) => {
        const expected = hmacSha256(secret, `${timestamp}${format.signedSeparator}`, request.rawBody).toString('hex');
        return signatures.some((candidate) => signaturesEqual(expected, candidate));
      });
      if (!valid) throw new VerificationError(401, 'bad_signature', `no ${format.header} ${format.signatureKey} signature matches the body with any configured secret`);
      checkTimestamp(timestamp, request.now, toleranceSeconds, where);
    },
  };
}
