/**
 * oncehook: the processes and the command. Ingest (the HTTP edge: verification, the claim,
 * the admin), the worker (the engine's queue consumer, its metrics server), and `oncehook`,
 * the command that runs them from a team's own project.
 */
export * from './config.js';
export * from './ingest/app.js';
export * from './ingest/build-ingest.js';
export * from './ingest/admin/index.js';
export * from './worker/build-worker.js';
export * from './worker/metrics-server.js';
export * from './ingest/run-ingest.js';
export * from './worker/run-worker.js';
