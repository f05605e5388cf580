/**
 * Worker entry point: parse config, connect, run the queue worker and the reconciler; on
 * SIGTERM stop taking jobs, let the ones in flight finish (their leases cover the rest if
 * the timeout hits), then close connections.
 */
import {
  announce,
  createEffectClients,
  createEventQueue,
  createWorkerMetrics,
  createFaults,
  createLogger,
  createPool,
  createRedis,
  loadWorkerConfig,
  onShutdownSignal,
  runMain,
} from '@oncehook/shared';
import { registerExampleHandlers } from './example';
import { HandlerRegistry } from './handlers';
import { startMetricsServer } from './metrics-server';
import { createEventWorker } from './worker';

runMain(async () => {
  const config = loadWorkerConfig();
  const log = createLogger('worker', config.LOG_LEVEL);
  const pool = createPool(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'oncehook-worker' });
  const connection = createRedis(config.REDIS_URL, 'worker');
  const producer = createRedis(config.REDIS_URL, 'producer');
  const queue = createEventQueue(producer, config.QUEUE_PREFIX);

  const metrics = createWorkerMetrics();
  const clients = createEffectClients({
    onOutcome: (outcome) => metrics.outboundCalls.inc({ api: outcome.name, outcome: outcome.result }),
    paymentUrl: config.PAYMENT_API_URL,
    emailUrl: config.EMAIL_API_URL,
    fulfilmentUrl: config.FULFILMENT_API_URL,
    timeoutMs: config.OUTBOUND_TIMEOUT_MS,
    maxTries: config.OUTBOUND_MAX_TRIES,
    baseDelayMs: config.OUTBOUND_RETRY_DELAY_MS,
  });
  const registry = registerExampleHandlers(new HandlerRegistry(), clients);

  const eventWorker = createEventWorker({
    pool,
    connection,
    queue,
    registry,
    log,
    faults: createFaults(config.ONCEHOOK_FAULTS),
    metrics,
    settings: {
      concurrency: config.WORKER_CONCURRENCY,
      leaseMs: config.LEASE_MS,
      maxAttempts: config.MAX_ATTEMPTS,
      retryBackoffMs: config.RETRY_BACKOFF_MS,
      queuePrefix: config.QUEUE_PREFIX,
      retention: {
        policy: { defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES },
        batchSize: config.RETENTION_BATCH_SIZE,
        maxBatches: config.RETENTION_MAX_BATCHES,
        intervalMs: config.RETENTION_INTERVAL_MS,
      },
      reconciler: {
        intervalMs: config.RECONCILE_INTERVAL_MS,
        requeueAfterMs: config.REQUEUE_AFTER_MS,
        batchSize: config.RECONCILE_BATCH_SIZE,
      },
    },
  });
  const metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.METRICS_HOST);
  announce(`worker metrics on ${metricsServer.port}`);
  eventWorker.reconciler.run();
  await eventWorker.worker.waitUntilReady();
  // Tests and scripts wait for this line.
  log.info({ concurrency: config.WORKER_CONCURRENCY }, 'worker ready');
  announce(`worker ready (pid ${process.pid})`);

  onShutdownSignal(async (signal) => {
    log.info({ signal }, 'shutting down: no new jobs, finishing in-flight ones');
    await eventWorker.close();
    await metricsServer.close();
    await queue.close();
    connection.disconnect();
    producer.disconnect();
    await pool.end();
    log.info('worker stopped');
  }, config.SHUTDOWN_TIMEOUT_MS);
});
