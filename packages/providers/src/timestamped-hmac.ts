/**
 * The signature Stripe and Paddle share: one header listing a timestamp and one or more hex
 * HMAC-SHA256 signatures (`t=<unix>,v1=<hex>[,v1=...]`; `ts=<unix>;h1=<hex>`) over
 * `<timestamp><separator><raw body>`. Any listed signature matching any configured secret
 * accepts (a secret rolling, or several endpoints); the timestamp is checked both ways.
 */
import { VerificationError } from '@oncehook/shared';
import { hmacSha256, signaturesEqual } from './hmac.js';
import { checkSecrets, checkTimestamp, parseTimestampedSignatures, requireHeader, topLevelEvent, type DeliveryRequest, type TopLevelFields, type WebhookSource } from './types.js';

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
      // mutant: precheck-timestamp-off
      checkTimestamp(parseTimestampedHmacHeader(format, header).timestamp, now, toleranceSeconds, where);
    },
    /** Throws 401 unless a listed signature matches the body with a configured secret and the timestamp is in tolerance. */
    verify(request: DeliveryRequest): void {
      const { timestamp, signatures } = parseTimestampedHmacHeader(format, request.header);
      const valid = secrets.some((secret) => {
        const expected = hmacSha256(secret, `${timestamp}${format.signedSeparator}`, request.rawBody).toString('hex');
        // mutant: signature-presence-only
        return signatures.some((candidate) => signaturesEqual(expected, candidate));
      });
      // mutant: verify-before-claim
      if (!valid) throw new VerificationError(401, 'bad_signature', `no ${format.header} ${format.signatureKey} signature matches the body with any configured secret`);
      checkTimestamp(timestamp, request.now, toleranceSeconds, where);
    },
  };
}

/** A provider that signs `<timestamp><sep><body>` in a list header and carries its event as top-level JSON fields (Stripe, Paddle). */
export interface TimestampedHmacJsonSender {
  kind: string;
  format: TimestampedHmacFormat;
  fields: TopLevelFields;
  /** How errors name its secrets (`Stripe signing secret`). */
  secretsLabel: string;
  /** A check of one secret's shape (null: fine), beyond being present and long enough. */
  checkSecret?: (secret: string) => string | null;
  defaultToleranceSeconds: number;
}

export function createTimestampedHmacJsonSource(sender: TimestampedHmacJsonSender, options: { name?: string; secrets: string[]; toleranceSeconds?: number }): WebhookSource {
  const name = options.name ?? sender.kind;
  checkSecrets(name, sender.secretsLabel, options.secrets, sender.checkSecret);
  const signature = timestampedHmacVerifier(sender.format, options.secrets, options.toleranceSeconds ?? sender.defaultToleranceSeconds);
  return {
    name,
    kind: sender.kind,
    precheck: signature.precheck,
    verify(request) {
      signature.verify(request);
      return { event: topLevelEvent(request.rawBody, { name, kind: sender.kind }, sender.fields) };
    },
  };
}
