/**
 * In-process ingest and workers over real Postgres, real Redis and real HTTP, for tests that
 * do not need to kill a process. (Crash tests use spawnService instead.)
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Queue } from 'bullmq';
import {
  createEffectClients,
  createEventQueue,
  createWorkerMetrics,
  createIngestMetrics,
  createLogger,
  createRedis,
  createStripeSource,
  noFaults,
  type EventJobData,
  type Faults,
  type IngestMetrics,
  type WorkerMetrics,
  type Pool,
  type WebhookSource,
} from '@oncehook/shared';
import type { AdminSettings } from '../../apps/ingest/src/admin';
import { createApp, type IngestSettings } from '../../apps/ingest/src/app';
import { registerExampleHandlers } from '../../apps/worker/src/example';
import { HandlerRegistry } from '../../apps/worker/src/handlers';
import { createEventWorker, type EventWorker, type WorkerSettings } from '../../apps/worker/src/worker';
import { REDIS_URL } from './db-urls';
import { STRIPE_SECRET } from './stripe';

export const testLog = createLogger('test', process.env.TEST_SHOW_LOGS ? 'debug' : 'silent');

/** A queue prefix of this test's own, so tests never see each other's jobs. */
export function testPrefix(): string {
  return `test-${randomUUID().slice(0, 8)}`;
}

export function defaultSources(): Map<string, WebhookSource> {
  return new Map([['stripe', createStripeSource({ secrets: [STRIPE_SECRET], toleranceSeconds: 300 })]]);
}

export interface IngestHandle {
  url: string;
  queue: Queue<EventJobData>;
  close(): Promise<void>;
}

export async function startIngest(opts: {
  pool: Pool;
  prefix: string;
  redisUrl?: string;
  sources?: Map<string, WebhookSource>;
  settings?: Partial<IngestSettings>;
  faults?: Faults;
  metrics?: IngestMetrics;
  admin?: AdminSettings;
}): Promise<IngestHandle> {
  const redis = createRedis(opts.redisUrl ?? REDIS_URL, 'producer');
  const queue = createEventQueue(redis, opts.prefix);
  const app = createApp({
    pool: opts.pool,
    queue,
    pingRedis: () => redis.ping(),
    sources: opts.sources ?? defaultSources(),
    log: testLog,
    faults: opts.faults ?? noFaults,
    metrics: opts.metrics ?? createIngestMetrics({ defaultMetrics: false }),
    admin: opts.admin,
    settings: { retention: { defaultDays: 35, overrides: {} }, bodyLimitBytes: 1024 * 1024, duplicateReenqueueAfterMs: 10_000, retryAfterSeconds: 5, enqueueTimeoutMs: 1_000, ...opts.settings },
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server)) as Server;
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    queue,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await queue.close();
      redis.disconnect();
    },
  };
}

/** Effect clients against a sandbox; without one they point at a closed port (top-up flows need none). */
export function testClients(sandboxUrl = 'http://127.0.0.1:9') {
  return createEffectClients({
    paymentUrl: `${sandboxUrl}/payment`,
    emailUrl: `${sandboxUrl}/email`,
    fulfilmentUrl: `${sandboxUrl}/fulfilment`,
    timeoutMs: 1_000,
    maxTries: 3,
    baseDelayMs: 20,
  });
}

export function exampleRegistry(sandboxUrl?: string): HandlerRegistry {
  return registerExampleHandlers(new HandlerRegistry(), testClients(sandboxUrl));
}

export const FAST_WORKER_SETTINGS = {
  concurrency: 8,
  leaseMs: 2_000,
  maxAttempts: 5,
  retryBackoffMs: 20,
  reconciler: { intervalMs: 200, requeueAfterMs: 500, batchSize: 500 },
};

export interface WorkerHandle extends EventWorker {
  queue: Queue<EventJobData>;
  close(): Promise<void>;
}

export function startWorker(opts: {
  pool: Pool;
  prefix: string;
  redisUrl?: string;
  registry?: HandlerRegistry;
  settings?: Partial<Omit<WorkerSettings, 'queuePrefix'>>;
  faults?: Faults;
  autorun?: boolean;
  /** Base URL of a sandbox (effect APIs) for the example handlers. */
  sandboxUrl?: string;
  metrics?: WorkerMetrics;
}): WorkerHandle {
  const connection = createRedis(opts.redisUrl ?? REDIS_URL, 'worker');
  const producer = createRedis(opts.redisUrl ?? REDIS_URL, 'producer');
  const queue = createEventQueue(producer, opts.prefix);
  const registry = opts.registry ?? exampleRegistry(opts.sandboxUrl);
  const metrics = opts.metrics ?? createWorkerMetrics({ defaultMetrics: false });
  const eventWorker = createEventWorker(
    {
      pool: opts.pool,
      connection,
      queue,
      registry,
      log: testLog,
      faults: opts.faults ?? noFaults,
      metrics,
      settings: { ...FAST_WORKER_SETTINGS, ...opts.settings, queuePrefix: opts.prefix },
    },
    { autorun: opts.autorun ?? true },
  );
  return {
    ...eventWorker,
    queue,
    async close() {
      await eventWorker.close();
      await queue.close();
      connection.disconnect();
      producer.disconnect();
    },
  };
}

/** Environment for a spawned ingest or worker process. */
export function serviceEnv(opts: { databaseUrl: string; prefix: string; redisUrl?: string; sandboxUrl?: string; extra?: Record<string, string> }): Record<string, string> {
  return {
    ...(opts.sandboxUrl
      ? {
          PAYMENT_API_URL: `${opts.sandboxUrl}/payment`,
          EMAIL_API_URL: `${opts.sandboxUrl}/email`,
          FULFILMENT_API_URL: `${opts.sandboxUrl}/fulfilment`,
          OUTBOUND_TIMEOUT_MS: '1000',
          OUTBOUND_RETRY_DELAY_MS: '20',
        }
      : {}),
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: opts.redisUrl ?? REDIS_URL,
    QUEUE_PREFIX: opts.prefix,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    PORT: '0',
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    METRICS_HOST: '127.0.0.1',
    LEASE_MS: String(FAST_WORKER_SETTINGS.leaseMs),
    RETRY_BACKOFF_MS: String(FAST_WORKER_SETTINGS.retryBackoffMs),
    RECONCILE_INTERVAL_MS: String(FAST_WORKER_SETTINGS.reconciler.intervalMs),
    REQUEUE_AFTER_MS: String(FAST_WORKER_SETTINGS.reconciler.requeueAfterMs),
    ...opts.extra,
  };
}

/** Reads the port an ingest process logged ("ingest listening on N"). */
export async function ingestUrl(service: { waitFor(pattern: RegExp, timeoutMs?: number): Promise<string> }): Promise<string> {
  const line = await service.waitFor(/ingest listening on \d+/);
  const port = /listening on (\d+)/.exec(line)?.[1];
  return `http://127.0.0.1:${port}`;
}

export async function ledgerSummary(pool: Pool): Promise<{ entries: number; perEvent: Map<string, number>; balance: number }> {
  const { rows } = await pool.query<{ source_event_id: string; n: number }>(
    `SELECT source_event_id, count(*)::int AS n FROM ledger_entries GROUP BY source_event_id`,
  );
  const perEvent = new Map(rows.map((row) => [row.source_event_id, row.n]));
  const entries = rows.reduce((sum, row) => sum + row.n, 0);
  const balance = await pool.query<{ total: number }>(`SELECT coalesce(sum(balance_cents), 0)::int AS total FROM ledger_accounts`);
  return { entries, perEvent, balance: balance.rows[0]?.total ?? 0 };
}

export async function stateCounts(pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM webhook_events GROUP BY state`);
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}
