/**
 * @oncehook/shared: the ground every room stands on: reading the environment, errors, logging,
 * metrics, tracing, fault points, Postgres connections and error codes, what a verified delivery
 * is, payload limits, liveness, the guard of every outbound call. It knows no provider (that is
 * @oncehook/providers) and no state machine (@oncehook/core).
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
// A stand-in for a handler's API: the test kit's, and `oncehook dev --stand-in`'s.
export * from './stand-in-api.js';
export * from './process.js';
export * from './timeout.js';
export * from './metrics.js';
export * from './type-label.js';
// Every outbound call of Oncehook's own (destinations, notifications, providers' APIs): one guard.
export * from './outbound/address-guard.js';
export * from './outbound/outbound-http.js';
export * from './outbound/secrets.js';
export * from './log-limiter.js';
export * from './tracing.js';
