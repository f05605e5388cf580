/**
 * Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>` = HMAC-SHA256 of `<ts>:<raw body>`
 * with the notification destination's secret. Several `h1` entries are accepted (rotation
 * behaviour is unconfirmed, so we are permissive in what matches, strict in format).
 *
 * Tolerance: Paddle's SDK allows only 5 s, in the past only. We default to 60 s both ways:
 * 5 s rejects real deliveries behind a slow proxy or a skewed clock, and a replay inside the
 * window is a duplicate of an event we already hold anyway.
 *
 * Stable id: body `event_id` (`evt_...`); `notification_id` is per destination and new on
 * replay, recorded in meta only.
 */
import { randomUUID } from 'node:crypto';
import { PADDLE_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyId, bodyText, hmacParts, nowSeconds, objectPayload } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, toleranceOption, toleranceVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { paddleBackfill } from './paddle-backfill.js';
import { createTimestampedHmacJsonSource, type TimestampedHmacFormat } from './timestamped-hmac.js';
import type { TopLevelFields, WebhookSource } from './types.js';

export interface PaddleSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds?: number;
}

const PADDLE_SIGNATURE: TimestampedHmacFormat = { header: 'Paddle-Signature', separator: ';', timestampKey: 'ts', signatureKey: 'h1', signedSeparator: ':' };

const PADDLE_FIELDS: TopLevelFields = {
  body: 'Paddle event',
  field: 'Paddle',
  id: 'event_id',
  type: 'event_type',
  signedAt: 'occurred_at',
  meta: { notificationId: 'notification_id' },
};

export function createPaddleSource(options: PaddleSourceOptions): WebhookSource {
  return createTimestampedHmacJsonSource({ kind: 'paddle', format: PADDLE_SIGNATURE, fields: PADDLE_FIELDS, secretsLabel: 'Paddle webhook', defaultToleranceSeconds: 60 }, options);
}

/** Signs as Paddle does: `ts=<unix>;h1=<hex>` over `<ts>:<body>`; `event_id`, `occurred_at`, `notification_id` in the body. */
export function signPaddleDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const timestamp = options.timestamp ?? nowSeconds();
  const object = objectPayload(payload);
  bodyId(object, 'event_id', payload, options.id, () => `evt_${randomUUID().replace(/-/g, '').slice(0, 26)}`);
  if (options.type && object.event_type === undefined) object.event_type = options.type;
  object.occurred_at ??= new Date(timestamp * 1000).toISOString();
  object.notification_id ??= `ntf_${randomUUID().replace(/-/g, '').slice(0, 26)}`;
  const body = bodyText(payload, object);
  return {
    body,
    headers: { ...JSON_CONTENT, 'paddle-signature': `ts=${timestamp};h1=${hmacParts(secret, `${timestamp}:`, body).toString('hex')}` },
    eventId: String(object.event_id),
  };
}

export const PADDLE_ADAPTER = defineAdapter({
  kind: 'paddle',
  title: 'Paddle Billing',
  docs: 'https://developer.paddle.com/webhooks/signature-verification',
  env: {
    secrets: secretsVariable('PADDLE_WEBHOOK_SECRET', 'Paddle notification secret(s). Enables `/webhooks/paddle`', 'pdl_ntfset_local_development_secret'),
    options: [toleranceVariable('PADDLE_TOLERANCE_SECONDS', 60, "Paddle's SDK uses 5 s; see docs/providers.md")],
  },
  redelivery: { days: 3, what: 'Paddle retries up to 60 times over 3 days' },
  options: { toleranceSeconds: toleranceOption },
  create: createPaddleSource,
  sign: signPaddleDelivery,
  payloads: PADDLE_PAYLOADS,
  backfill: paddleBackfill(PADDLE_FIELDS),
});
