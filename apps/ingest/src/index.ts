/** Ingest as a library: what the test kit and the tests start (the same wiring as server.ts). */
export { buildIngest, ingestSettings, type BuildIngestOptions, type OncehookIngest } from './build-ingest';
export { createApp, type IngestDeps, type IngestSettings } from './app';
export { createClaimBatcher, type ClaimBatcher } from './claim-batcher';
export { createEnqueueRelay, type EnqueueRelay } from './enqueue-relay';
export type { AdminSettings } from './admin';
