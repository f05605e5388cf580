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
import {
  bodyHash,
  checkEventId,
  checkEventType,
  checkSecrets,
  compactMeta,
  parseJsonBody,
  requireHeader,
  toDate,
  type DeliveryRequest,
  type Verified,
  type WebhookSource,
} from './types.js';

export type ShopifyBodyDedupe = 'any-topic' | 'per-topic' | 'off';

export interface ShopifySourceOptions {
  name?: string;
  secrets: string[];
  bodyDedupe?: ShopifyBodyDedupe;
}

function parseHeaders(header: DeliveryRequest['header']) {
  const signature = requireHeader({ header }, 'X-Shopify-Hmac-Sha256');
  if (!/^[A-Za-z0-9+/]{43}=$/.test(signature)) {
    throw new VerificationError(400, 'malformed_header', 'X-Shopify-Hmac-Sha256 must be the base64 of a 32-byte HMAC');
  }
  return { signature, webhookId: requireHeader({ header }, 'X-Shopify-Webhook-Id'), topic: requireHeader({ header }, 'X-Shopify-Topic') };
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
      const { signature, webhookId, topic } = parseHeaders(request.header);
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
            eventId: request.header('X-Shopify-Event-Id'),
            shopDomain: request.header('X-Shopify-Shop-Domain'),
            apiVersion: request.header('X-Shopify-API-Version'),
            triggeredAt: toDate(request.header('X-Shopify-Triggered-At'))?.toISOString(),
          }),
          bodyHash: dedupe === 'off' ? null : bodyHash(dedupe === 'per-topic' ? Buffer.concat([Buffer.from(`${type}\0`), request.rawBody]) : request.rawBody),
        },
      };
    },
  };
}
