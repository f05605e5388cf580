/**
 * @oncehook/testkit: test your handlers against what Oncehook exists to survive.
 *
 * - signedDelivery(kind, payload, secret, options): a delivery signed as the provider signs it
 * - fixture(kind, type): a realistic payload (Stripe's CLI trigger fixtures, GitHub, Shopify, ...)
 * - checkHandler(handler, event, options): a crash at every step boundary, resumed; concurrent
 *   duplicates; on a real Postgres, through the real state machine. See docs/handlers.md.
 * - startStandInApi(options): a stand-in for the API a handler calls, honouring idempotency keys
 *   as real APIs do, recording every request, failing on demand.
 */
export { startStandInApi, type StandInApi, type StandInApiOptions, type StandInEffect, type StandInRequest } from '@oncehook/shared';
export { checkHandler, SimulatedCrash, type CheckEvent, type CheckOptions, type CheckReport, type ScenarioReport } from './check-handler.js';
// The signer and fixtures live beside the verifiers (@oncehook/shared), where `oncehook send`
// finds them too: the command carries no test support. One signer: signedDelivery signs as any
// provider does, a table sender through its scheme (the scheme signer is not exported here).
export { fixture, fixtureTypes, signedDelivery, type DeliveryKind, type SignedDelivery, type SignedDeliveryOptions } from '@oncehook/providers';
