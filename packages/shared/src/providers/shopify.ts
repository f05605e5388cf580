/**
 * Shopify: `X-Shopify-Hmac-Sha256: <base64>` = HMAC-SHA256 of the raw body with the app's
 * client secret. No signed timestamp (`X-Shopify-Triggered-At` is unsigned, so it is recorded
 * but never trusted). After a secret rotation Shopify may sign with the old secret for up to
 * an hour: configure both.
 *
 * Stable id: `X-Shopify-Webhook-Id` (Shopify's docs: dedupe on it). `X-Shopify-Event-Id`
 * (shared by every subscription to the same event) is recorded in meta as `eventId`.
 * Type: `X-Shopify-Topic` (`orders/create`).
 */
import { hmacSha256, signaturesEqual } from './hmac';
import { checkEventId, checkEventType, compactMeta, parseJsonBody, requireHeader, toDate, type DeliveryRequest, type Verified, type WebhookSource } from './types';
import { VerificationError } from '../errors';

export interface ShopifySourceOptions {
  name?: string;
  secrets: string[];
}

export function createShopifySource(options: ShopifySourceOptions): WebhookSource {
  const name = options.name ?? 'shopify';
  if (options.secrets.length === 0) throw new Error(`source ${name}: at least one Shopify client secret is required`);
  return {
    name,
    kind: 'shopify',
    verify(request: DeliveryRequest): Verified {
      const signature = requireHeader(request, 'X-Shopify-Hmac-Sha256');
      if (!/^[A-Za-z0-9+/]{43}=$/.test(signature)) {
        throw new VerificationError(400, 'malformed_header', 'X-Shopify-Hmac-Sha256 must be the base64 of a 32-byte HMAC');
      }
      const webhookId = requireHeader(request, 'X-Shopify-Webhook-Id');
      const topic = requireHeader(request, 'X-Shopify-Topic');

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
        },
      };
    },
  };
}
