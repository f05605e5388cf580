/**
 * Realistic payloads of the events people test with first, shaped as each provider sends them
 * (ids and times fresh on every call), found through the provider list (each descriptor's
 * `payloads`: adapter-fixtures.ts, each table sender's file in senders/). `oncehook send` delivers them; handler
 * tests can use them too:
 *
 *   const payload = fixture('stripe', 'payment_intent.succeeded');
 *   const delivery = signedDelivery('stripe', payload, secret);
 *
 * `stripe` `payment_intent.succeeded` is what `stripe trigger payment_intent.succeeded` sends:
 * a $20.00 card payment "(created by Stripe CLI)" with NO customer and no metadata.
 */
import { providerOf } from '../providers.js';
import type { DeliveryKind } from './signed-delivery.js';

function payloadsOf(kind: DeliveryKind) {
  return providerOf(kind === 'svix' ? 'standard-webhooks' : kind).payloads;
}

/** The event types with a built-in payload, per kind (the first is the default of `oncehook send`). */
export function fixtureTypes(kind: DeliveryKind): string[] {
  return Object.keys(payloadsOf(kind));
}

/** A fresh payload of `type` as `kind` sends it; throws naming the types there are when there is none. */
export function fixture(kind: DeliveryKind, type: string): Record<string, unknown> {
  const build = payloadsOf(kind)[type];
  if (!build) {
    const known = fixtureTypes(kind);
    throw new Error(
      known.length > 0
        ? `no built-in ${kind} payload for "${type}"; built in: ${known.join(', ')} (or pass your own JSON with --file)`
        : `no built-in ${kind} payloads: pass your own JSON with --file`,
    );
  }
  return build();
}
