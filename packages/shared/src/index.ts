/**
 * @oncehook/shared: what Oncehook's engine (@oncehook/core) and its processes (the `oncehook`
 * package: ingest, worker, the command) share, below the engine: configuration from the
 * environment, logging, metrics, tracing, fault points, Postgres connections and error codes,
 * the providers' verification, payload limits, liveness. Nothing here knows the state machine.
 */
export * from './config';
export * from './errors';
export * from './event-key';
export * from './faults';
export * from './interfaces';
export * from './payload-limits';
export * from './liveness';
export * from './lock-keys';
export * from './logger';
export * from './schema-name';
export * from './db/pool';
export * from './db/pg-errors';
export * from './providers/types';
export * from './providers/hmac';
export * from './providers/stripe';
export * from './providers/github';
export * from './providers/shopify';
export * from './providers/standard-webhooks';
export * from './providers/slack';
export * from './providers/paddle';
export * from './providers/generic-hmac';
export * from './providers/sources';
export * from './process';
export * from './timeout';
export * from './metrics';
export * from './retention';
export * from './log-limiter';
export * from './tracing';
