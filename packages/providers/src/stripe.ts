/**
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=<hex>]` over `<t>.<raw body>`,
 * HMAC-SHA256 keyed with the whole `whsec_...` string (not base64-decoded).
 *
 * - Several v1 entries appear while a secret is rolling; any match with any configured secret
 *   accepts. v0 (a legacy test-mode scheme) is never accepted.
 * - The timestamp is checked both ways (default 300 s, as Stripe's `constructEvent`).
 * - Stable id: the body's `id` (`evt_...`); `t` and the signature change on every attempt.
 */
import { randomUUID } from 'node:crypto';
import { STRIPE_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyId, bodyText, hmacParts, nowSeconds, objectPayload } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, toleranceOption, toleranceVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { stripeBackfill } from './stripe-backfill.js';
import { createTimestampedHmacJsonSource, type TimestampedHmacFormat } from './timestamped-hmac.js';
import type { TopLevelFields, WebhookSource } from './types.js';

export interface StripeSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds?: number;
}

export const STRIPE_SIGNATURE_HEADER = 'Stripe-Signature';

const STRIPE_SIGNATURE: TimestampedHmacFormat = {
  header: STRIPE_SIGNATURE_HEADER,
  separator: ',',
  timestampKey: 't',
  signatureKey: 'v1',
  signedSeparator: '.',
  note: ' (v0 is not accepted)',
};

const STRIPE_FIELDS: TopLevelFields = { body: 'Stripe event', field: 'Stripe event', id: 'id', type: 'type', signedAt: 'created', meta: { account: 'account' } };

export function createStripeSource(options: StripeSourceOptions): WebhookSource {
  const checkSecret = (secret: string) =>
    /^whsec_\S{16,}$/.test(secret) ? null : 'is not a Stripe signing secret: it starts with whsec_ (copy it from the endpoint in the dashboard, or from `stripe listen`)';
  return createTimestampedHmacJsonSource(
    { kind: 'stripe', format: STRIPE_SIGNATURE, fields: STRIPE_FIELDS, secretsLabel: 'Stripe signing', checkSecret, defaultToleranceSeconds: 300 },
    options,
  );
}

/** Signs as Stripe does: `t=<unix>,v1=<hex>` over `<t>.<body>`, the event id and `created` in the body. */
export function signStripeDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const timestamp = options.timestamp ?? nowSeconds();
  const event: Record<string, unknown> = { object: 'event', created: timestamp, ...objectPayload(payload) };
  bodyId(event, 'id', payload, options.id, () => `evt_${randomUUID().replace(/-/g, '').slice(0, 24)}`);
  if (options.type && event.type === undefined) event.type = options.type;
  const body = bodyText(payload, event);
  return { body, headers: { ...JSON_CONTENT, 'stripe-signature': `t=${timestamp},v1=${hmacParts(secret, `${timestamp}.`, body).toString('hex')}` }, eventId: String(event.id) };
}

export const STRIPE_ADAPTER = defineAdapter({
  kind: 'stripe',
  title: 'Stripe',
  docs: 'https://docs.stripe.com/webhooks#verify-events',
  env: {
    secrets: secretsVariable(
      'STRIPE_WEBHOOK_SECRET',
      'Stripe signing secret(s), `whsec_...`; comma-separated while rotating. Enables `/webhooks/stripe`',
      'whsec_local_development_secret',
    ),
    // Stripe's own `constructEvent` uses 300 s; we check it both ways.
    options: [toleranceVariable('STRIPE_TOLERANCE_SECONDS', 300, "too old and too far in the future; Stripe's `constructEvent` uses 300 s")],
  },
  redelivery: { days: 3, what: 'Stripe retries live-mode deliveries for up to 3 days' },
  options: { toleranceSeconds: toleranceOption },
  create: createStripeSource,
  sign: signStripeDelivery,
  payloads: STRIPE_PAYLOADS,
  backfill: stripeBackfill(STRIPE_FIELDS),
});
