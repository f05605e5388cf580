/**
 * @oncehook/providers: every sender Oncehook verifies (its scheme, signature check, stable id,
 * redelivery horizon), the list that names them (providers.ts for the adapters, senders.ts for
 * the table senders), deliveries signed as each one signs them with realistic payloads
 * (`oncehook send`, the test kit), and the provider API clients a backfill reads through.
 * Adding a sender touches this package only (docs/providers.md, "Adding a sender").
 */
export * from './types.js';
export * from './descriptor.js';
export * from './providers.js';
export * from './sender-descriptor.js';
export * from './hmac.js';
export * from './stripe.js';
export * from './github.js';
export * from './shopify.js';
export * from './standard-webhooks.js';
export * from './slack.js';
export * from './paddle.js';
export * from './generic-hmac.js';
export * from './scheme.js';
export * from './senders.js';
export * from './sources.js';
export * from './retention.js';
// The providers' event APIs, read by `oncehook backfill`.
export * from './backfill.js';
// Deliveries signed as each provider signs them, and realistic payloads.
export * from './signing/signed-delivery.js';
export * from './signing/sign-scheme.js';
export * from './signing/fixtures.js';
