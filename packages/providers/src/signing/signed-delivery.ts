/**
 * Deliveries signed the way each provider signs them, for a handler author's tests (and
 * `oncehook send`). Each provider's signer lives beside its verifier (its descriptor's `sign`);
 * our own test suite checks them against the providers' official SDKs.
 *
 *   const delivery = signedDelivery('stripe', { type: 'charge.refunded', data: { object: charge } }, secret);
 *   await fetch(`${ingestUrl}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
 */
import type { ProviderKind } from '@oncehook/sdk';
import type { SignedDelivery, SignedDeliveryOptions } from '../descriptor.js';
import { providerOf } from '../providers.js';
import { signStandardWebhooksDelivery } from '../standard-webhooks.js';

export type { SignedDelivery, SignedDeliveryOptions } from '../descriptor.js';

/** Every kind a delivery can be signed as: every provider's, and `svix` (Standard Webhooks with svix- headers). */
export type DeliveryKind = ProviderKind | 'svix';

/** Signs `payload` (an object, or a JSON string sent byte for byte) as `kind` signs it, with `secret`. */
export function signedDelivery(kind: DeliveryKind, payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  if (kind === 'svix') return signStandardWebhooksDelivery(payload, secret, options, 'svix');
  return providerOf(kind).sign(payload, secret, options);
}
