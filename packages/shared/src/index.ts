/**
 * @oncehook/shared: what Oncehook's engine (@oncehook/core) and its processes (the `oncehook`
 * package: ingest, worker, the command) share, below the engine: reading the environment, logging, metrics, tracing, fault points, Postgres connections and error codes,
 * the providers' verification, payload limits, liveness. Nothing here knows the state machine
 * (its vocabulary, event keys, lock keys and queue names live in @oncehook/core; the processes'
 * configuration in the `oncehook` package).
 */
export * from './env.js';
export * from './errors.js';
export * from './faults.js';
export * from './verified-event.js';
export * from './payload-limits.js';
export * from './liveness.js';
export * from './logger.js';
export * from './schema-name.js';
export * from './db/pool.js';
export * from './db/admin-connection.js';
export * from './db/cancel.js';
export * from './db/pg-errors.js';
export * from './providers/types.js';
export * from './providers/descriptor.js';
export * from './providers/providers.js';
export * from './providers/sender-descriptor.js';
export * from './providers/hmac.js';
export * from './providers/stripe.js';
export * from './providers/backfill.js';
export * from './providers/github.js';
export * from './providers/shopify.js';
export * from './providers/standard-webhooks.js';
export * from './providers/slack.js';
export * from './providers/paddle.js';
export * from './providers/generic-hmac.js';
export * from './providers/sources.js';
export * from './providers/scheme.js';
export * from './providers/senders.js';
// Deliveries signed as each provider signs them, and realistic payloads (`oncehook send`, the test kit).
export * from './signing/signed-delivery.js';
// A stand-in for a handler's API: the test kit's, and `oncehook dev --stand-in`'s.
export * from './stand-in-api.js';
export * from './signing/sign-scheme.js';
export * from './signing/fixtures.js';
export * from './process.js';
export * from './timeout.js';
export * from './metrics.js';
export * from './type-label.js';
export * from './retention.js';
// Every outbound call of Oncehook's own (destinations, notifications, providers' APIs): one guard.
export * from './outbound/address-guard.js';
export * from './outbound/outbound-http.js';
export * from './outbound/secrets.js';
export * from './log-limiter.js';
export * from './tracing.js';
