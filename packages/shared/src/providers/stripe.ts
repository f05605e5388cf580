/**
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]` over `<t>.<raw body>`,
 * HMAC-SHA256 keyed with the whole `whsec_...` string (not base64-decoded).
 *
 * - Several v1 entries appear while a secret is rolling; any match with any configured secret
 *   accepts. v0 (test-mode legacy scheme) is never accepted.
 * - The timestamp is checked both ways: older than the tolerance is a replay, further in the
 *   future than the tolerance is a forged or badly skewed clock.
 * - Stable id: the body's `id` (`evt_...`); `t` and the signature change on every attempt.
 */
import type { VerifiedEvent } from '../interfaces';
import { hmacSha256, signaturesEqual } from './hmac';
import { checkEventId, isRecord, parseJsonBody, VerificationError, type DeliveryRequest, type WebhookSource } from './types';

export interface StripeSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds: number;
}

export const STRIPE_SIGNATURE_HEADER = 'stripe-signature';

export function parseStripeSignature(header: string): { timestamp: number; v1: string[] } {
  let timestamp: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== null || !/^\d{1,12}$/.test(value)) {
        throw new VerificationError(400, 'malformed_header', 'Stripe-Signature must carry exactly one numeric t= element');
      }
      timestamp = Number.parseInt(value, 10);
    } else if (key === 'v1') {
      v1.push(value);
    }
  }
  if (timestamp === null) throw new VerificationError(400, 'malformed_header', 'Stripe-Signature has no t= element');
  if (v1.length === 0) throw new VerificationError(400, 'malformed_header', 'Stripe-Signature has no v1= signature');
  return { timestamp, v1 };
}

export function createStripeSource(options: StripeSourceOptions): WebhookSource {
  const name = options.name ?? 'stripe';
  if (options.secrets.length === 0) throw new Error(`source ${name}: at least one Stripe signing secret is required`);
  return {
    name,
    kind: 'stripe',
    verify(request: DeliveryRequest): VerifiedEvent {
      const header = request.header(STRIPE_SIGNATURE_HEADER);
      if (!header) throw new VerificationError(400, 'missing_header', 'missing Stripe-Signature header');
      const { timestamp, v1 } = parseStripeSignature(header);

      const signedPayload = [String(timestamp), '.', request.rawBody] as const;
      const valid = options.secrets.some((secret) => {
        const expected = hmacSha256(secret, ...signedPayload).toString('hex');
        return v1.some((candidate) => signaturesEqual(expected, candidate));
      });
      if (!valid) throw new VerificationError(401, 'bad_signature', 'no Stripe-Signature v1 signature matches the body with any configured secret');

      const age = Math.floor(request.now.getTime() / 1000) - timestamp;
      if (age > options.toleranceSeconds) {
        throw new VerificationError(401, 'timestamp_too_old', `Stripe-Signature timestamp is ${age}s old (tolerance ${options.toleranceSeconds}s)`);
      }
      if (-age > options.toleranceSeconds) {
        throw new VerificationError(401, 'timestamp_in_future', `Stripe-Signature timestamp is ${-age}s in the future (tolerance ${options.toleranceSeconds}s)`);
      }

      const { text, json } = parseJsonBody(request.rawBody);
      if (!isRecord(json)) throw new VerificationError(400, 'malformed_payload', 'Stripe event body must be a JSON object');
      const eventId = checkEventId(json.id, 'Stripe event "id"');
      if (typeof json.type !== 'string' || json.type.length === 0 || json.type.length > 255) {
        throw new VerificationError(400, 'malformed_payload', 'Stripe event "type" must be a non-empty string');
      }
      const created = typeof json.created === 'number' && Number.isFinite(json.created) ? new Date(json.created * 1000) : null;
      return { provider: name, kind: 'stripe', eventId, type: json.type, signedAt: created, rawBody: text, payload: json };
    },
  };
}
