/**
 * Ingest entry point: parse config, connect, listen; on SIGTERM stop accepting, let in-flight
 * deliveries finish (each either commits its claim and answers, or answers 5xx), then close
 * the queue, Redis and the pool.
 */
import { serve } from '@hono/node-server';
import type { Server } from 'node:http';
import {
  announce,
  createEventQueue,
  createIngestMetrics,
  createFaults,
  createLogger,
  createPool,
  createRedis,
  loadIngestConfig,
  onShutdownSignal,
  runMain,
  sourcesFromConfig,
} from '@oncehook/shared';
import { createApp } from './app';

runMain(async () => {
  const config = loadIngestConfig();
  const sources = sourcesFromConfig(config);
  const log = createLogger('ingest', config.LOG_LEVEL);
  const pool = createPool(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'oncehook-ingest' });
  const redis = createRedis(config.REDIS_URL, 'producer');
  const queue = createEventQueue(redis, config.QUEUE_PREFIX);

  const app = createApp({
    pool,
    queue,
    pingRedis: () => redis.ping(),
    sources,
    log,
    faults: createFaults(config.ONCEHOOK_FAULTS),
    metrics: createIngestMetrics(),
    admin: { token: config.ADMIN_TOKEN, username: config.ADMIN_USERNAME, password: config.ADMIN_PASSWORD, readOnly: config.ADMIN_READ_ONLY },
    settings: {
      retention: { defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES },
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
      duplicateReenqueueAfterMs: config.DUPLICATE_REENQUEUE_AFTER_MS,
      retryAfterSeconds: config.RETRY_AFTER_SECONDS,
      enqueueTimeoutMs: config.ENQUEUE_TIMEOUT_MS,
    },
  });

  const server = serve({ fetch: app.fetch, port: config.PORT, hostname: config.HOST }, (info) => {
    // Tests and scripts wait for this line (and read the port when PORT=0).
    log.info({ port: info.port, sources: [...sources.keys()] }, `ingest listening on ${info.port}`);
    announce(`ingest listening on ${info.port}`);
  }) as Server;

  onShutdownSignal(async (signal) => {
    log.info({ signal }, 'shutting down: no new connections, finishing in-flight deliveries');
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Keep-alive connections become idle once their response is sent; close them as they
      // do, instead of waiting out the keep-alive timeout.
      const sweep = setInterval(() => server.closeIdleConnections(), 100);
      server.once('close', () => clearInterval(sweep));
      server.closeIdleConnections();
    });
    await queue.close();
    redis.disconnect();
    await pool.end();
    log.info('ingest stopped');
  }, config.SHUTDOWN_TIMEOUT_MS);
});
