/**
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]` over `<t>.<raw body>`,
 * HMAC-SHA256 keyed with the whole `whsec_...` string (not base64-decoded).
 *
 * - Several v1 entries appear while a secret is rolling; any match with any configured secret
 *   accepts. v0 (a legacy test-mode scheme) is never accepted.
 * - The timestamp is checked both ways (default 300 s, as Stripe's `constructEvent`).
 * - Stable id: the body's `id` (`evt_...`); `t` and the signature change on every attempt.
 */
import { hmacSha256, signaturesEqual } from './hmac.js';
import {
  checkEventId,
  checkSecrets,
  checkEventType,
  checkTimestamp,
  compactMeta,
  parseJsonObject,
  parseTimestampedSignatures,
  requireHeader,
  signedTime,
  type DeliveryRequest,
  type Verified,
  type WebhookSource,
} from './types.js';
import { VerificationError } from '../errors.js';

export interface StripeSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds?: number;
}

export const STRIPE_SIGNATURE_HEADER = 'Stripe-Signature';

export function parseStripeSignature(header: string): { timestamp: number; v1: string[] } {
  const { timestamp, signatures } = parseTimestampedSignatures(header, {
    name: STRIPE_SIGNATURE_HEADER,
    separator: ',',
    timestampKey: 't',
    signatureKey: 'v1',
    note: ' (v0 is not accepted)',
  });
  return { timestamp, v1: signatures };
}

export function createStripeSource(options: StripeSourceOptions): WebhookSource {
  const name = options.name ?? 'stripe';
  const tolerance = options.toleranceSeconds ?? 300;
  checkSecrets(name, 'Stripe signing', options.secrets, (secret) =>
    /^whsec_\S{16,}$/.test(secret) ? null : 'is not a Stripe signing secret: it starts with whsec_ (copy it from the endpoint in the dashboard, or from `stripe listen`)',
  );
  return {
    name,
    kind: 'stripe',
    precheck(header, now) {
      const { timestamp } = parseStripeSignature(requireHeader({ header }, STRIPE_SIGNATURE_HEADER));
      checkTimestamp(timestamp, now, tolerance, 'Stripe-Signature timestamp');
    },
    verify(request: DeliveryRequest): Verified {
      const { timestamp, v1 } = parseStripeSignature(requireHeader(request, STRIPE_SIGNATURE_HEADER));
      const valid = options.secrets.some((secret) => {
        const expected = hmacSha256(secret, `${timestamp}.`, request.rawBody).toString('hex');
        return v1.some((candidate) => signaturesEqual(expected, candidate));
      });
      if (!valid) throw new VerificationError(401, 'bad_signature', 'no Stripe-Signature v1 signature matches the body with any configured secret');
      checkTimestamp(timestamp, request.now, tolerance, 'Stripe-Signature timestamp');

      const { text, json } = parseJsonObject(request.rawBody, 'Stripe event');
      const eventId = checkEventId(json.id, 'Stripe event "id"');
      const type = checkEventType(json.type, 'Stripe event "type"');
      return {
        event: {
          provider: name,
          kind: 'stripe',
          eventId,
          type,
          signedAt: signedTime(json.created, 'Stripe event "created"'),
          rawBody: text,
          payload: json,
          meta: compactMeta({ account: typeof json.account === 'string' ? json.account : null }),
        },
      };
    },
  };
}
