/**
 * An ingest process, start to stop: parse the configuration, build, listen (and the liveness
 * port when HEALTH_PORT is set), and on SIGTERM stop accepting, let in-flight deliveries finish
 * (each either commits its claim and answers, or answers 5xx), then close the queue, its store
 * and the pool. `oncehook ingest` and apps/ingest run this.
 */
import { awaitDatabase, checkRedisMode } from '@oncehook/core';
import { announceLogged, createLogger, onShutdownSignal, startLiveness, startTracing, type Env } from '@oncehook/shared';
import { loadIngestConfig } from '../config.js';
import { buildIngest } from './build-ingest.js';

export async function runIngest(env: Env = process.env): Promise<void> {
  const config = loadIngestConfig(env);
  // REDIS_URL naming one node of a Redis Cluster is refused now, not found later as MOVED.
  await checkRedisMode(config);
  // OpenTelemetry, when the OTEL_* variables ask for it (tracing.ts); before anything makes a span.
  const tracing = await startTracing('oncehook-ingest', env);
  // Its database exists, takes its credentials and has Oncehook's tables up to date (else one
  // line and exit 1); one that cannot be reached yet is waited for before listening.
  const log = createLogger('ingest', config.LOG_LEVEL, config.LOG_FORMAT);
  await awaitDatabase(config.DATABASE_URL, { schema: config.ONCEHOOK_SCHEMA, log });
  const ingest = buildIngest(config, { destinations: config.destinations, log });
  const { port } = await ingest.listen();
  // Tests and scripts wait for this line (and read the port when PORT=0).
  announceLogged(ingest.log, config.LOG_FORMAT, { port, sources: [...ingest.sources.keys()] }, `ingest listening on ${port}`);
  // Liveness on a port of its own, answered off the main event loop (liveness.ts).
  const liveness = config.HEALTH_PORT === undefined ? null : await startLiveness({ port: config.HEALTH_PORT, host: config.HOST, stallMs: config.LIVENESS_STALL_MS });
  if (liveness) ingest.log.info({ port: liveness.port, stallMs: config.LIVENESS_STALL_MS }, `liveness on ${liveness.port}`);

  onShutdownSignal(async (signal) => {
    ingest.log.info({ signal }, 'shutting down: no new connections, finishing in-flight deliveries');
    await ingest.close();
    await liveness?.close();
    await tracing?.shutdown();
    ingest.log.info('ingest stopped');
  }, config.SHUTDOWN_TIMEOUT_MS);
}
