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
  createEventQueues,
  eventQueueNames,
  type EventQueue,
  type EventQueues,
  createQueries,
  openQueueConnection,
  pingQueue,
  closeQueueConnection,
  type Queries,
  createEnqueueRelay,
  createActivityFlusher,
  deliveryReadings,
  type Destination,
} from '@oncehook/core';
import { listenFailure, createFaults, createIngestMetrics, createLogger, createPool, type Faults, type IngestMetrics, type Logger, type Pool } from '@oncehook/shared';
import { sourcesFromConfig, type WebhookSource } from '@oncehook/providers';
import type { IngestConfig } from '../config.js';
import type { Hono } from 'hono';
import { createApp, type IngestSettings } from './app.js';
import { adminConfigured } from './admin/auth.js';
import { createTypeLabels } from './type-labels.js';
import { RecentDuplicates } from './recent-duplicates.js';

/** An admin statement waits at most this long for a row lock (a worker's run, a pause): it gives up rather than queue behind the engine. */
const ADMIN_LOCK_TIMEOUT_MS = 2_000;

export interface BuildIngestOptions {
  log?: Logger;
  metrics?: IngestMetrics;
  faults?: Faults;
  /** Default: the sources the configuration declares (sourcesFromConfig). */
  sources?: Map<string, WebhookSource>;
  /** For the admin's Destinations page: the destinations of this environment, or what is wrong with them. */
  destinations?: readonly Destination[] | string;
  now?: () => Date;
}

export interface OncehookIngest {
  config: IngestConfig;
  app: Hono;
  pool: Pool;
  queries: Queries;
  /** The first shard's queue (the only one when QUEUE_SHARDS=1): BullMQ's Queue on Redis, PostgresEventQueue on Postgres. */
  queue: EventQueue;
  /** Every shard, and the router by event key. */
  queues: EventQueues;
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
    retention: { defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES, keyDays: config.KEY_RETENTION_DAYS },
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    duplicateReenqueueAfterMs: config.DUPLICATE_REENQUEUE_AFTER_MS,
    retryAfterSeconds: config.RETRY_AFTER_SECONDS,
    enqueueTimeoutMs: config.ENQUEUE_TIMEOUT_MS,
    maxInflightBodyBytes: config.MAX_INFLIGHT_BODY_BYTES,
    maxWaitingClaims: config.MAX_WAITING_CLAIMS,
    breakerOpenMs: config.CIRCUIT_BREAKER_OPEN_MS,
    claimTimeoutMs: config.CLAIM_TIMEOUT_MS,
    logDeliveries: config.DELIVERY_LOG,
  };
}

export function buildIngest(config: IngestConfig, options: BuildIngestOptions = {}): OncehookIngest {
  const sources = options.sources ?? sourcesFromConfig(config);
  const log = options.log ?? createLogger('ingest', config.LOG_LEVEL, config.LOG_FORMAT);
  const metrics = options.metrics ?? createIngestMetrics();
  const pool = createPool(config.DATABASE_URL, {
    max: config.DATABASE_POOL_SIZE,
    connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS,
    applicationName: 'oncehook-ingest',
    onStatement: () => metrics.dbStatements.inc(),
    onRoundTrip: () => metrics.dbRoundTrips.inc(),
  });
  const adminSettings = {
    token: config.ADMIN_TOKEN,
    tokens: config.ADMIN_TOKENS,
    username: config.ADMIN_USERNAME,
    password: config.ADMIN_PASSWORD,
    readOnly: config.ADMIN_READ_ONLY,
    origins: config.ADMIN_ORIGINS,
    destinations: options.destinations ?? [],
    budget: {
      poolSize: config.ADMIN_POOL_SIZE,
      poolWaitMs: config.ADMIN_POOL_WAIT_MS,
      statementTimeoutMs: config.ADMIN_STATEMENT_TIMEOUT_MS,
      searchesPerUser: config.ADMIN_SEARCHES_PER_USER,
      loginFailuresPerMinute: config.ADMIN_LOGIN_FAILURES_PER_MINUTE,
    },
  };
  // The admin's own connections, with Postgres-side timeouts on every statement it sends: an
  // operator's search can wait for these, never for a delivery's (docs/security.md).
  const adminPool = adminConfigured(adminSettings)
    ? createPool(config.DATABASE_URL, {
        max: config.ADMIN_POOL_SIZE,
        connectionTimeoutMillis: config.ADMIN_POOL_WAIT_MS,
        applicationName: 'oncehook-admin',
        statementTimeoutMs: config.ADMIN_STATEMENT_TIMEOUT_MS,
        lockTimeoutMs: ADMIN_LOCK_TIMEOUT_MS,
        idleInTransactionTimeoutMs: config.ADMIN_STATEMENT_TIMEOUT_MS + ADMIN_LOCK_TIMEOUT_MS,
      })
    : undefined;
  const queries = createQueries(config.ONCEHOOK_SCHEMA);
  const queueStore = openQueueConnection(config, 'producer');
  const queues = createEventQueues(queueStore, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  const queue = queues.shards[0]!;
  const typeLabels = createTypeLabels({ pool, queries, log });
  const faults = options.faults ?? createFaults(config.ONCEHOOK_FAULTS);
  const relay = createEnqueueRelay({ queue: queues, log, faults, enqueueTimeoutMs: config.ENQUEUE_TIMEOUT_MS });
  const app = createApp({
    pool,
    queries,
    queue: queues,
    queueBackend: queueStore.backend,
    pingQueue: () => pingQueue(queueStore, config.QUEUE_PREFIX, eventQueueNames(config.QUEUE_SHARDS)),
    sources,
    log,
    faults,
    relay,
    metrics,
    admin: adminSettings,
    adminPool,
    recentDuplicates: new RecentDuplicates(),
    typeLabels,
    metricsToken: config.METRICS_TOKEN,
    now: options.now,
    settings: ingestSettings(config),
  });

  // The minute's deliveries for the admin's Activity page, from the counter above (activity.ts).
  const activity =
    config.ACTIVITY_FLUSH_MS > 0
      ? createActivityFlusher({ pool, queries, log, intervalMs: config.ACTIVITY_FLUSH_MS, read: () => deliveryReadings(metrics.eventsTotal) })
      : undefined;
  let server: Server | undefined;
  return {
    config,
    app,
    pool,
    queries,
    queue,
    queues,
    sources,
    log,
    async listen(port = config.PORT) {
      // The handled types, before the first delivery (a database still down is tolerated).
      await typeLabels.refresh();
      typeLabels.start();
      activity?.start();
      return new Promise((resolve, reject) => {
        // Slow senders cannot hold connections and buffers: a request must be complete within
        // REQUEST_TIMEOUT_MS (its headers within HEADERS_TIMEOUT_MS), checked every second
        // (Node's default check runs every 30 s), and open connections are bounded.
        const serverOptions = {
          requestTimeout: config.REQUEST_TIMEOUT_MS,
          headersTimeout: Math.min(config.HEADERS_TIMEOUT_MS, config.REQUEST_TIMEOUT_MS),
          connectionsCheckingInterval: 1000,
        };
        const s = serve({ fetch: app.fetch, port, hostname: config.HOST, serverOptions }, (info) => resolve({ port: info.port, server: s as Server })) as Server;
        s.maxConnections = config.MAX_CONNECTIONS;
        s.once('error', (error) => reject(listenFailure(error, port, 'PORT')));
        server = s;
      });
    },
    async close() {
      typeLabels.stop();
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
      // The answered deliveries' jobs not yet added (the reconciler would add them too, later).
      // mutant: relay-no-flush-on-shutdown
      await relay.flush(config.ENQUEUE_TIMEOUT_MS * 2);
      await activity?.stop();
      await queues.close();
      await closeQueueConnection(queueStore);
      await adminPool?.end();
      await pool.end();
    },
  };
}
