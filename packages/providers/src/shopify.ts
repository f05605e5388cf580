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
 * deliveries: `shopify-hmac-sha256`, `shopify-webhook-id`, `shopify-topic` with
 * `shopify-action`, ...). Read as shopify-app-js reads them (its `webhooks.validate`): when
 * `shopify-hmac-sha256` is present the delivery is an events delivery and the `shopify-*` set
 * is read (signature, webhook id); otherwise the classic set. The other set, when a delivery
 * carries both, is not compared: its topic may use the other vocabulary (`products/create`
 * beside `Product` with `shopify-action: create`), as Shopify's own library builds them. One
 * exception: two DIFFERENT webhook ids for one body is a 400 (the id is the dedupe key; a
 * delivery that names two is a forgery or a broken proxy). The webhook id of either set is the
 * key (they name the same delivery, so a delivery seen under both sets is one event).
 * The type: `X-Shopify-Topic` when present (the topic vocabulary of webhook subscriptions,
 * `orders/create`, which handlers name), else `shopify-topic` as sent; `shopify-action`,
 * `shopify-handle` and `shopify-resource-id` are recorded in meta.
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
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { SHOPIFY_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyText, hmacParts, nowSeconds } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { VerificationError } from '@oncehook/shared';
import { requireBodySignature } from './hmac.js';
import { bodyHash, checkEventId, checkEventType, compactMeta, parseJsonBody, toDate, type DeliveryRequest, headerSignedSource, type WebhookSource } from './types.js';

export type ShopifyBodyDedupe = 'any-topic' | 'per-topic' | 'off';

export interface ShopifySourceOptions {
  name?: string;
  secrets: string[];
  bodyDedupe?: ShopifyBodyDedupe;
}

/** The names both header sets share, classic spelling (`X-Shopify-Hmac-Sha256` / `shopify-hmac-sha256`). */
const SHOPIFY_HEADERS = ['Hmac-Sha256', 'Webhook-Id', 'Topic', 'Shop-Domain', 'API-Version', 'Triggered-At', 'Event-Id'] as const;
type ShopifyHeaderName = (typeof SHOPIFY_HEADERS)[number];

/** The header of one set: `X-Shopify-<Name>` or `shopify-<name>`. */
function inSet(set: 'classic' | 'events', name: string): string {
  return set === 'classic' ? `X-Shopify-${name}` : `shopify-${name.toLowerCase()}`;
}

/**
 * The delivery's header set, chosen as shopify-app-js chooses it (`shopify-hmac-sha256` present:
 * the events set; else the classic set), and a lookup that reads that set first, then the
 * other. Two different webhook ids: 400.
 */
export function shopifyHeaders(header: DeliveryRequest['header']): { set: 'classic' | 'events'; get: (name: ShopifyHeaderName) => string | null } {
  const set = header('shopify-hmac-sha256') !== null ? 'events' : 'classic';
  const other = set === 'events' ? 'classic' : 'events';
  const ids = [header(inSet('classic', 'Webhook-Id')), header(inSet('events', 'Webhook-Id'))];
  // mutant: shopify-two-webhook-ids
  if (ids[0] !== null && ids[1] !== null && ids[0] !== ids[1]) {
    throw new VerificationError(400, 'malformed_header', 'X-Shopify-Webhook-Id and shopify-webhook-id name two different deliveries: a delivery carries one webhook id');
  }
  return { set, get: (name) => header(inSet(set, name)) ?? header(inSet(other, name)) };
}

function parseHeaders(header: DeliveryRequest['header']) {
  const { set, get } = shopifyHeaders(header);
  const required = (name: ShopifyHeaderName, value = get(name)) => {
    if (value === null || value === '') throw new VerificationError(400, 'missing_header', `missing X-Shopify-${name} (or shopify-${name.toLowerCase()}) header`);
    return value;
  };
  // The signature of the chosen set only (the other set's, if any, is not read: shopify-app-js).
  const signature = required('Hmac-Sha256', header(inSet(set, 'Hmac-Sha256')));
  if (!/^[A-Za-z0-9+/]{43}=$/.test(signature)) {
    throw new VerificationError(400, 'malformed_header', `${inSet(set, 'Hmac-Sha256')} must be the standard base64 of a 32-byte HMAC`);
  }
  // The classic topic when present: the vocabulary handlers subscribe with.
  const topic = required('Topic', header(inSet('classic', 'Topic')) ?? header(inSet('events', 'Topic')));
  return { signature, webhookId: required('Webhook-Id'), topic, get, header };
}

export function createShopifySource(options: ShopifySourceOptions): WebhookSource {
  const dedupe = options.bodyDedupe ?? 'any-topic';
  return headerSignedSource('shopify', options, 'Shopify client', parseHeaders, (request, { signature, webhookId, topic, get, header }, name) => {
    requireBodySignature(options.secrets, request.rawBody, 'base64', signature, 'X-Shopify-Hmac-Sha256');

    const eventId = checkEventId(webhookId, 'X-Shopify-Webhook-Id');
    const type = checkEventType(topic, 'X-Shopify-Topic');
    const { text, json } = parseJsonBody(request.rawBody);
    return {
      event: {
        source: name,
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
          action: header('shopify-action'),
          handle: header('shopify-handle'),
          resourceId: header('shopify-resource-id'),
        }),
        // mutant: shopify-body-dedupe-off
        bodyHash: dedupe === 'off' ? null : bodyHash(dedupe === 'per-topic' ? Buffer.concat([Buffer.from(`${type}\0`), request.rawBody]) : request.rawBody),
      },
    };
  });
}

/** Signs as Shopify does: base64 HMAC-SHA256 of the body; webhook id, topic (the type) and shop in the classic headers. */
export function signShopifyDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const timestamp = options.timestamp ?? nowSeconds();
  const body = bodyText(payload);
  const id = options.id ?? randomUUID();
  return {
    body,
    headers: {
      ...JSON_CONTENT,
      'x-shopify-hmac-sha256': hmacParts(secret, body).toString('base64'),
      'x-shopify-webhook-id': id,
      'x-shopify-topic': options.type ?? 'orders/create',
      'x-shopify-shop-domain': options.shopDomain ?? 'example.myshopify.com',
      'x-shopify-api-version': '2025-01',
      'x-shopify-triggered-at': new Date(timestamp * 1000).toISOString(),
      'x-shopify-event-id': randomUUID(),
    },
    eventId: id,
  };
}

export const SHOPIFY_ADAPTER = defineAdapter({
  kind: 'shopify',
  title: 'Shopify',
  docs: 'https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook',
  env: {
    secrets: secretsVariable('SHOPIFY_WEBHOOK_SECRET', 'Shopify app client secret(s). Enables `/webhooks/shopify`', 'local-development-shopify-secret'),
    options: [],
  },
  redelivery: { days: 1, what: 'Shopify retries 8 times over 4 hours' },
  options: { bodyDedupe: z.enum(['any-topic', 'per-topic', 'off']).optional() },
  create: createShopifySource,
  sign: signShopifyDelivery,
  payloads: SHOPIFY_PAYLOADS,
});
