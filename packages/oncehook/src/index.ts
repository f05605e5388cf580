/**
 * oncehook: the processes and the command. Ingest (the HTTP edge: verification, the claim,
 * the admin), the worker (the engine's queue consumer, its metrics server), and `oncehook`,
 * the command that runs them from a team's own project.
 */
export * from './ingest/app';
export * from './ingest/build-ingest';
export * from './ingest/admin';
export * from './worker/build-worker';
export * from './worker/metrics-server';
