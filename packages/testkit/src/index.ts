/**
 * @oncehook/testkit: test your handlers against what Oncehook exists to survive.
 *
 * - signedDelivery(kind, payload, secret, options): a delivery signed as the provider signs it
 * - fixture(kind, type): a realistic payload (Stripe's CLI trigger fixtures, GitHub, Shopify, ...)
 * - checkHandler(handler, event, options): a crash at every step boundary, resumed; concurrent
 *   duplicates; on a real Postgres, through the real state machine. See docs/handlers.md.
 */
export { checkHandler, SimulatedCrash, type CheckEvent, type CheckOptions, type CheckReport, type ScenarioReport } from './check-handler.js';
export { fixture, fixtureTypes } from './fixtures.js';
export { signedDelivery, type DeliveryKind, type SignedDelivery, type SignedDeliveryOptions } from './signed-delivery.js';
export { signSchemeDelivery, type SchemeDelivery, type SchemeSignOptions } from './sign-scheme.js';
