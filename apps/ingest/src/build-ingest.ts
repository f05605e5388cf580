/**
 * buildIngest(config): the ingest process, wired: connections, the configured sources, the
 * Hono app. The production entry point (server.ts) and the tests start ingest this way, so
 * there is one wiring to trust.
 *
 *   const ingest = buildIngest(loadIngestConfig());
 *   const { port } = await ingest.listen();
 *   ...
 *   await ingest.close();
 */
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import {
  createEventQueue,
  createFaults,
  createIngestMetrics,
  createLogger,
  createPool,
  createQueries,
  createRedis,
  sourcesFromConfig,
  type EventJobData,
  type Faults,
  type IngestConfig,
  type IngestMetrics,
  type Logger,
  type Pool,
  type Queries,
  type WebhookSource,
} from '@oncehook/shared';
import type { Queue } from 'bullmq';
import type { Hono } from 'hono';
import { createApp, type IngestSettings } from './app';
import { RecentDuplicates } from './recent-duplicates';

export interface BuildIngestOptions {
  log?: Logger;
  metrics?: IngestMetrics;
  faults?: Faults;
  /** Default: the sources the configuration declares (sourcesFromConfig). */
  sources?: Map<string, WebhookSource>;
  now?: () => Date;
}

export interface OncehookIngest {
  config: IngestConfig;
  app: Hono;
  pool: Pool;
  queries: Queries;
  queue: Queue<EventJobData>;
  sources: ReadonlyMap<string, WebhookSource>;
  log: Logger;
  /** Listens on PORT/HOST (or the given port); resolves with the port bound. */
  listen(port?: number): Promise<{ port: number; server: Server }>;
  /** Stops accepting, lets in-flight deliveries finish, closes connections. */
  close(): Promise<void>;
}

/** The ingest's settings, from its configuration: the one mapping from environment to settings. */
export function ingestSettings(config: IngestConfig): IngestSettings {
  return {
    retention: { defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES },
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    duplicateReenqueueAfterMs: config.DUPLICATE_REENQUEUE_AFTER_MS,
    retryAfterSeconds: config.RETRY_AFTER_SECONDS,
    enqueueTimeoutMs: config.ENQUEUE_TIMEOUT_MS,
  };
}

export function buildIngest(config: IngestConfig, options: BuildIngestOptions = {}): OncehookIngest {
  const sources = options.sources ?? sourcesFromConfig(config);
  const log = options.log ?? createLogger('ingest', config.LOG_LEVEL);
  const pool = createPool(config.DATABASE_URL, { max: config.DATABASE_POOL_SIZE, applicationName: 'oncehook-ingest' });
  const queries = createQueries(config.ONCEHOOK_SCHEMA);
  const redis = createRedis(config.REDIS_URL, 'producer');
  const queue = createEventQueue(redis, config.QUEUE_PREFIX);
  const app = createApp({
    pool,
    queries,
    queue,
    pingRedis: () => redis.ping(),
    sources,
    log,
    faults: options.faults ?? createFaults(config.ONCEHOOK_FAULTS),
    metrics: options.metrics ?? createIngestMetrics(),
    admin: { token: config.ADMIN_TOKEN, username: config.ADMIN_USERNAME, password: config.ADMIN_PASSWORD, readOnly: config.ADMIN_READ_ONLY },
    recentDuplicates: new RecentDuplicates(),
    now: options.now,
    settings: ingestSettings(config),
  });

  let server: Server | undefined;
  return {
    config,
    app,
    pool,
    queries,
    queue,
    sources,
    log,
    listen(port = config.PORT) {
      return new Promise((resolve, reject) => {
        const s = serve({ fetch: app.fetch, port, hostname: config.HOST }, (info) => resolve({ port: info.port, server: s as Server })) as Server;
        s.once('error', reject);
        server = s;
      });
    },
    async close() {
      if (server) {
        const s = server;
        await new Promise<void>((resolve) => {
          s.close(() => resolve());
          // Keep-alive connections become idle once their response is sent; close them as
          // they do, instead of waiting out the keep-alive timeout.
          const sweep = setInterval(() => s.closeIdleConnections(), 100);
          s.once('close', () => clearInterval(sweep));
          s.closeIdleConnections();
        });
      }
      await queue.close();
      redis.disconnect();
      await pool.end();
    },
  };
}
