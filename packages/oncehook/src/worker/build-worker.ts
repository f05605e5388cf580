/**
 * buildWorker(config, handlers): one worker process, wired. The production entry point
 * (main.ts) and the tests start workers this way, so there is one wiring to trust.
 *
 *   const worker = buildWorker(loadWorkerConfig(), handlers);
 *   await worker.start();   // queue worker, reconciler loop, metrics server
 *   ...
 *   await worker.close();   // stop taking jobs, finish in-flight ones, close connections
 */
import {
  closeQueueConnection,
  createEngine,
  createEventQueues,
  createEventWorker,
  eventQueueNames,
  HandlerRegistry,
  openQueueConnection,
  pingQueue,
  checkReadiness,
  destinationHandler,
  type EngineHooks,
  type EngineEvents,
  subscribeHooks,
  type ForwardObserver,
  type EventQueue,
  type EventQueues,
  type EventWorker,
  type ProcessSettings,
  type Queries,
  type WorkerSettings,
  createActivityFlusher,
  createBackfillScheduler,
  runReadings,
  type BackfillScheduler,
  type RegisteredHandler,
  type Destination,
} from '@oncehook/core';
import { observeOutbound, type Handler } from '@oncehook/sdk';
import { createFaults, createLogger, createPool, createWorkerMetrics, type Faults, type Logger, type Pool, type WorkerMetrics } from '@oncehook/shared';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { WorkerConfig } from '../config.js';
import { startMetricsServer } from './metrics-server.js';

export interface BuildWorkerOptions {
  /** Defaults: a pino logger at LOG_LEVEL, fresh metrics, faults from ONCEHOOK_FAULTS. */
  log?: Logger;
  metrics?: WorkerMetrics;
  faults?: Faults;
  /**
   * @deprecated Subscribe to `worker.events` (`step:calling`, `step:committed`) instead; kept
   * for one release (CHANGELOG.md).
   */
  hooks?: EngineHooks;
  /** The destinations this worker forwards to, run beside the handlers (default: `config.destinations`). */
  destinations?: readonly Destination[];
  /** Where the scheduled backfill reads the providers' API keys (default process.env). */
  env?: Record<string, string | undefined>;
}

export interface OncehookWorker {
  config: WorkerConfig;
  pool: Pool;
  queries: Queries;
  /** The first shard's queue (the only one when QUEUE_SHARDS=1): BullMQ's Queue on Redis, PostgresEventQueue on Postgres. */
  queue: EventQueue;
  /** Every shard, and the router by event key. */
  queues: EventQueues;
  registry: HandlerRegistry;
  metrics: WorkerMetrics;
  /** What the engine reports (engine-events.ts in @oncehook/core): runs ended or waiting, steps, reconciler passes. */
  events: EngineEvents;
  log: Logger;
  eventWorker: EventWorker;
  /** The scheduled backfill (BACKFILL_SCHEDULE); undefined when nothing is scheduled. */
  backfill: BackfillScheduler | undefined;
  /**
   * Starts the parts: the queue worker, the reconciler loop and the metrics server (each can be
   * left off, for tests that drive one part by hand). Resolves once the queue worker is ready.
   */
  start(parts?: { reconciler?: boolean; metricsServer?: boolean; backfill?: boolean }): Promise<{ metricsPort: number | null }>;
  close(): Promise<void>;
}

/** The engine's settings, from the worker's configuration (the one mapping of these variables). */
export function engineSettings(config: WorkerConfig): ProcessSettings {
  return {
    leaseMs: config.LEASE_MS,
    retry: { maxAttempts: config.MAX_ATTEMPTS, backoffMs: config.RETRY_BACKOFF_MS },
    unhandled: config.UNHANDLED_EVENTS,
  };
}

/** The worker's settings, from its configuration: the one mapping from environment to settings. */
export function workerSettings(config: WorkerConfig): WorkerSettings {
  return {
    concurrency: config.WORKER_CONCURRENCY,
    queuePrefix: config.QUEUE_PREFIX,
    queueShards: config.QUEUE_SHARDS,
    consumeShards: config.WORKER_QUEUE_SHARDS,
    retention: {
      policy: { defaultDays: config.RETENTION_DAYS, overrides: config.RETENTION_OVERRIDES, keyDays: config.KEY_RETENTION_DAYS },
      batchSize: config.RETENTION_BATCH_SIZE,
      maxBatches: config.RETENTION_MAX_BATCHES,
      intervalMs: config.RETENTION_INTERVAL_MS,
    },
    reconciler: {
      intervalMs: config.RECONCILE_INTERVAL_MS,
      requeueAfterMs: config.REQUEUE_AFTER_MS,
      batchSize: config.RECONCILE_BATCH_SIZE,
      sampleActivity: config.ACTIVITY_FLUSH_MS > 0,
    },
    failureNotify:
      config.FAILURE_NOTIFY_URL && config.FAILURE_NOTIFY_SECRET
        ? { url: config.FAILURE_NOTIFY_URL, hmacKey: config.FAILURE_NOTIFY_SECRET, adminUrl: config.ADMIN_PUBLIC_URL }
        : undefined,
  };
}

/** What the admin's handler pages show of a loaded handler: its source and type, and what it declares (a key function as `byKey`). */
function registeredHandler(h: Handler): RegisteredHandler {
  const limits = h.limits;
  return {
    name: h.name,
    source: h.source,
    kind: h.kind,
    type: h.type,
    description: h.description,
    settings: {
      priority: h.priority,
      ...(h.retries ? { retries: h.retries } : {}),
      ...(limits?.concurrency ? { concurrency: { limit: limits.concurrency.limit, byKey: limits.concurrency.key !== undefined } } : {}),
      ...(limits?.rateLimit ? { rateLimit: { limit: limits.rateLimit.limit, periodMs: limits.rateLimit.periodMs, byKey: limits.rateLimit.key !== undefined } } : {}),
      ...(limits?.breakerAfter ? { circuitBreaker: { consecutiveFailures: limits.breakerAfter } } : {}),
    },
  };
}

export function buildWorker(config: WorkerConfig, handlers: readonly Handler[], options: BuildWorkerOptions = {}): OncehookWorker {
  // This process among the workers (the admin's handler pages list where each handler is loaded).
  const workerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = options.log ?? createLogger('worker', config.LOG_LEVEL, config.LOG_FORMAT);
  const metrics = options.metrics ?? createWorkerMetrics();
  // Destinations run as handlers (destinations/destination-handler.ts); their calls are counted.
  const observer: ForwardObserver = {
    started: (destination) => metrics.destinationInFlight.inc({ destination }),
    ended: (destination, outcome, seconds) => {
      metrics.destinationInFlight.dec({ destination });
      metrics.destinationCalls.inc({ destination, outcome });
      metrics.destinationCallSeconds.observe({ destination }, seconds);
    },
  };
  const registry = new HandlerRegistry(handlers);
  for (const destination of options.destinations ?? config.destinations) registry.add(destinationHandler(destination, observer), 'the destinations');
  const pool = createPool(config.DATABASE_URL, {
    max: config.DATABASE_POOL_SIZE,
    connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS,
    applicationName: 'oncehook-worker',
    onStatement: () => metrics.dbStatements.inc(),
    onRoundTrip: () => metrics.dbRoundTrips.inc(),
  });
  // On Postgres (QUEUE_BACKEND), each shard's Worker has a pool of its own: one connection per
  // job in flight plus its lock renewals and fetches.
  const connection = openQueueConnection(config, 'worker', { poolSize: config.WORKER_CONCURRENCY + 2 });
  const producer = openQueueConnection(config, 'producer');
  const queues = createEventQueues(producer, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  const queue = queues.shards[0]!;
  const stopObserving = observeOutbound((outcome) => metrics.outboundCalls.inc({ api: outcome.name, outcome: outcome.result }));

  const engine = createEngine({
    pool,
    schema: config.ONCEHOOK_SCHEMA,
    handlers: registry,
    log,
    settings: engineSettings(config),
    faults: options.faults ?? createFaults(config.ONCEHOOK_FAULTS),
  });
  if (options.hooks) subscribeHooks(engine.events, options.hooks);
  const { queries } = engine;
  const eventWorker = createEventWorker({ engine, connection, queue: queues, log, metrics, settings: { ...workerSettings(config), workerId } }, { autorun: false });
  // The minute's run attempts and their latency for the admin's Activity page, from the histogram above (activity.ts).
  const activity =
    config.ACTIVITY_FLUSH_MS > 0
      ? createActivityFlusher({ pool, queries, log, intervalMs: config.ACTIVITY_FLUSH_MS, read: () => runReadings(metrics.processingDuration) })
      : undefined;

  const backfill =
    config.BACKFILL_SCHEDULE.length > 0
      ? createBackfillScheduler({
          pool,
          queries,
          queue: queues,
          log,
          metrics,
          schedule: config.BACKFILL_SCHEDULE,
          env: options.env ?? process.env,
          keyHorizonDays: config.KEY_RETENTION_DAYS,
          maxCallsPerPass: config.BACKFILL_MAX_CALLS,
          workerId,
        })
      : undefined;

  /** GET /readyz: ingest's checks, on this worker's connections. */
  const readiness = () => checkReadiness(pool, () => pingQueue(producer, config.QUEUE_PREFIX, eventQueueNames(config.QUEUE_SHARDS)), producer.backend);
  let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
  let closed = false;
  return {
    config,
    pool,
    queries,
    queue,
    queues,
    registry,
    metrics,
    events: engine.events,
    log,
    eventWorker,
    backfill,
    async start(parts = {}) {
      // What this worker runs, for ingest's metric labels and the admin (best effort: a worker
      // must start even if this write fails; the next start retries it).
      await queries
        .registerHandlers(pool, workerId, registry.all().map(registeredHandler))
        .catch((error: unknown) => log.warn({ err: error }, 'could not record the loaded handlers in the database'));
      if (parts.metricsServer ?? true) metricsServer = await startMetricsServer(metrics.registry, config.METRICS_PORT, config.METRICS_HOST, config.METRICS_TOKEN, readiness);
      if (parts.reconciler ?? true) eventWorker.reconciler.run();
      activity?.start();
      if (parts.backfill ?? true) backfill?.start();
      for (const worker of eventWorker.workers) void worker.run().catch((error: unknown) => log.error({ err: error }, 'queue worker stopped'));
      await Promise.all(eventWorker.workers.map((worker) => worker.waitUntilReady()));
      return { metricsPort: metricsServer?.port ?? null };
    },
    async close() {
      if (closed) return;
      closed = true;
      await backfill?.stop();
      await eventWorker.close();
      await activity?.stop();
      await queries.forgetWorkers(pool, workerId).catch((error: unknown) => log.warn({ err: error }, 'could not remove this worker from the handlers it had loaded'));
      await metricsServer?.close();
      stopObserving();
      await queues.close();
      await closeQueueConnection(connection);
      await closeQueueConnection(producer);
      await pool.end();
    },
  };
}
