/**
 * Shopify: `X-Shopify-Hmac-Sha256: <base64>` = HMAC-SHA256 of the raw body with the app's
 * client secret. No signed timestamp (`X-Shopify-Triggered-At` is unsigned, so it is recorded
 * but never trusted). After a secret rotation Shopify may sign with the old secret for up to
 * an hour: configure both.
 *
 * Stable id: `X-Shopify-Webhook-Id` (Shopify's docs: dedupe on it). `X-Shopify-Event-Id`
 * (shared by every subscription to the same event) is recorded in meta as `eventId`.
 * Type: `X-Shopify-Topic` (`orders/create`).
 *
 * Two header sets: the classic `X-Shopify-*` and the newer `shopify-*` (Shopify's "events"
 * deliveries: `shopify-hmac-sha256`, `shopify-webhook-id`, `shopify-topic`, ...; shopify-app-js
 * reads either and calls `shopify-webhook-id` the idempotency key). Either set is accepted; the
 * webhook id of either is the key (they name the same delivery, so a delivery seen under both
 * sets is one event). When a delivery carries both, every value present in both must agree, or
 * it is a 400: two signatures or two ids for one body is a forgery or a broken proxy.
 *
 * The id and the topic travel in headers the signature does not cover, and an order's body does
 * not say which topic it was sent for. So the body is a second dedupe key (docs/providers.md):
 * - `any-topic` (default): sha256(body) per source. A captured body replayed under a new id, or
 *   under another topic (an orders/updated body sent as orders/create), is a duplicate.
 *   Shopify's retries repeat the webhook id and the body, so they stay plain duplicates. The
 *   cost: two topics of one endpoint whose bodies are byte-identical count once (subscribe
 *   them to separate sources, or use per-topic);
 * - `per-topic`: sha256(topic NUL body): replays under a new id are caught, replays under another
 *   topic are not (key the handlers' effects on the order, as the example does);
 * - `off`.
 */
import { VerificationError } from '../errors.js';
import { hmacSha256, signaturesEqual } from './hmac.js';
import { bodyHash, checkEventId, checkEventType, checkSecrets, compactMeta, parseJsonBody, toDate, type DeliveryRequest, type Verified, type WebhookSource } from './types.js';

export type ShopifyBodyDedupe = 'any-topic' | 'per-topic' | 'off';

export interface ShopifySourceOptions {
  name?: string;
  secrets: string[];
  bodyDedupe?: ShopifyBodyDedupe;
}

/** The names both header sets share, classic spelling first (`X-Shopify-Hmac-Sha256` / `shopify-hmac-sha256`). */
const SHOPIFY_HEADERS = ['Hmac-Sha256', 'Webhook-Id', 'Topic', 'Shop-Domain', 'API-Version', 'Triggered-At', 'Event-Id'] as const;
type ShopifyHeaderName = (typeof SHOPIFY_HEADERS)[number];

/**
 * One lookup over both sets: the classic header, else the new one; when both are present they
 * must be equal (400 naming both).
 */
export function shopifyHeaders(header: DeliveryRequest['header']): (name: ShopifyHeaderName) => string | null {
  const values = new Map<ShopifyHeaderName, string | null>();
  for (const name of SHOPIFY_HEADERS) {
    const classic = header(`X-Shopify-${name}`);
    const events = header(`shopify-${name.toLowerCase()}`);
    if (classic !== null && events !== null && classic !== events) {
      throw new VerificationError(400, 'malformed_header', `X-Shopify-${name} and shopify-${name.toLowerCase()} disagree: a delivery carries one value for both`);
    }
    values.set(name, classic ?? events);
  }
  return (name) => values.get(name) ?? null;
}

function parseHeaders(header: DeliveryRequest['header']) {
  const get = shopifyHeaders(header);
  const required = (name: ShopifyHeaderName) => {
    const value = get(name);
    if (value === null || value === '') throw new VerificationError(400, 'missing_header', `missing X-Shopify-${name} (or shopify-${name.toLowerCase()}) header`);
    return value;
  };
  const signature = required('Hmac-Sha256');
  if (!/^[A-Za-z0-9+/]{43}=$/.test(signature)) {
    throw new VerificationError(400, 'malformed_header', 'X-Shopify-Hmac-Sha256 must be the base64 of a 32-byte HMAC');
  }
  return { signature, webhookId: required('Webhook-Id'), topic: required('Topic'), get };
}

export function createShopifySource(options: ShopifySourceOptions): WebhookSource {
  const name = options.name ?? 'shopify';
  const dedupe = options.bodyDedupe ?? 'any-topic';
  checkSecrets(name, 'Shopify client', options.secrets);
  return {
    name,
    kind: 'shopify',
    precheck(header) {
      parseHeaders(header);
    },
    verify(request: DeliveryRequest): Verified {
      const { signature, webhookId, topic, get } = parseHeaders(request.header);
      const valid = options.secrets.some((secret) => signaturesEqual(hmacSha256(secret, request.rawBody).toString('base64'), signature));
      if (!valid) throw new VerificationError(401, 'bad_signature', 'X-Shopify-Hmac-Sha256 does not match the body with any configured secret');

      const eventId = checkEventId(webhookId, 'X-Shopify-Webhook-Id');
      const type = checkEventType(topic, 'X-Shopify-Topic');
      const { text, json } = parseJsonBody(request.rawBody);
      return {
        event: {
          provider: name,
          kind: 'shopify',
          eventId,
          type,
          signedAt: null,
          rawBody: text,
          payload: json,
          meta: compactMeta({
            eventId: get('Event-Id'),
            shopDomain: get('Shop-Domain'),
            apiVersion: get('API-Version'),
            triggeredAt: toDate(get('Triggered-At'))?.toISOString(),
          }),
          bodyHash: dedupe === 'off' ? null : bodyHash(dedupe === 'per-topic' ? Buffer.concat([Buffer.from(`${type}\0`), request.rawBody]) : request.rawBody),
        },
      };
    },
  };
}
