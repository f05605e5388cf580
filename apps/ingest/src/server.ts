/**
 * Ingest entry point: parse config, build, listen; on SIGTERM stop accepting, let in-flight
 * deliveries finish (each either commits its claim and answers, or answers 5xx), then close
 * the queue, its store (Redis, or Postgres) and the pool.
 */
import { announce, loadIngestConfig, onShutdownSignal, runMain, startLiveness, startTracing } from '@oncehook/shared';
import { buildIngest } from 'oncehook';

runMain(async () => {
  const config = loadIngestConfig();
  // OpenTelemetry, when the OTEL_* variables ask for it (tracing.ts); before anything makes a span.
  const tracing = await startTracing('oncehook-ingest');
  const ingest = buildIngest(config);
  const { port } = await ingest.listen();
  // Tests and scripts wait for this line (and read the port when PORT=0).
  ingest.log.info({ port, sources: [...ingest.sources.keys()] }, `ingest listening on ${port}`);
  announce(`ingest listening on ${port}`);
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
});
