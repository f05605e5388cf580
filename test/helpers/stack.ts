/**
 * Ingest and workers for tests, started exactly as production starts them: buildIngest and
 * buildWorker from a configuration parsed from an environment (`testEnv`). In-process for
 * tests that do not need to kill a process; `spawnService` (harness) with the same
 * environment for crash tests.
 */
import { randomUUID } from 'node:crypto';
import { buildIngest, type OncehookIngest, loadIngestConfig, loadWorkerConfig, parseClusterNodes, buildWorker, type OncehookWorker } from 'oncehook';
import { createShopClients, shopSettings } from '@oncehook/example-shop/src/clients';
import { shopHandlers } from '@oncehook/example-shop/src/handlers';
import { REDIS_URL, STRIPE_SECRET } from '@oncehook/harness';
import type { Handler } from '@oncehook/sdk';
import { inject } from 'vitest';
import {
  createIngestMetrics,
  createLogger,
  createWorkerMetrics,
  DEFAULT_SCHEMA,
  noFaults,
  type Faults,
  type IngestMetrics,
  type Logger,
  type Pool,
  type WorkerMetrics,
} from '@oncehook/shared';
import { createStripeSource, type WebhookSource } from '@oncehook/providers';
import {
  createEngine,
  createEventQueues,
  createQueries,
  openQueueConnection,
  type EventQueues,
  type Engine,
  type EngineOptions,
  type ProcessSettings,
  type QueueBackend,
  type QueueConnection,
  type Destination,
} from '@oncehook/core';

export const testLog = createLogger('test', process.env.TEST_SHOW_LOGS ? 'debug' : 'silent');

/** The queries, over the default schema the tests use. */
export const q = createQueries(DEFAULT_SCHEMA);
/** Oncehook's tables, for tests' own SQL. */
export const T = {
  events: `${DEFAULT_SCHEMA}.events`,
  runs: `${DEFAULT_SCHEMA}.handler_runs`,
  steps: `${DEFAULT_SCHEMA}.steps`,
  actions: `${DEFAULT_SCHEMA}.operator_actions`,
  versions: `${DEFAULT_SCHEMA}.object_versions`,
  deliveries: `${DEFAULT_SCHEMA}.deliveries`,
  deliveryCounts: `${DEFAULT_SCHEMA}.delivery_counts`,
} as const;

/**
 * QUEUE_BACKEND of the stacks tests start: `redis` unless TEST_QUEUE_BACKEND says otherwise.
 * `npm run test:postgres-queue` runs the crash, chaos and queue tests with `postgres`.
 */
export const TEST_QUEUE_BACKEND: QueueBackend = process.env.TEST_QUEUE_BACKEND === 'postgres' ? 'postgres' : 'redis';

/**
 * The redis-cluster project (vitest.config.ts) runs the queue-facing, crash and chaos tests
 * again on a Redis Cluster its global setup started (test/helpers/cluster-setup.ts): every
 * stack a test starts gets REDIS_CLUSTER_NODES and QUEUE_SHARDS=6, unless the test names a
 * Redis of its own. Undefined elsewhere.
 */
export const TEST_REDIS_CLUSTER: string | undefined = process.env.TEST_REDIS_CLUSTER === '1' ? inject('redisClusterNodes') : undefined;

/** QUEUE_SHARDS of the stacks tests start (6 on the cluster, 1 elsewhere). */
export const TEST_QUEUE_SHARDS = TEST_REDIS_CLUSTER ? 6 : 1;

/** The queue store of a test's own (the backend above), for tests that look at jobs. */
export function testQueueStore(databaseUrl: string, prefix: string): QueueConnection {
  const seeds = TEST_REDIS_CLUSTER ? parseClusterNodes(TEST_REDIS_CLUSTER) : undefined;
  if (typeof seeds === 'string') throw new Error(`redisClusterNodes: ${seeds}`);
  return openQueueConnection({ QUEUE_BACKEND: TEST_QUEUE_BACKEND, REDIS_URL, REDIS_CLUSTER_NODES: seeds, DATABASE_URL: databaseUrl, QUEUE_PREFIX: prefix }, 'producer');
}

/** The test's queues (every shard of TEST_QUEUE_SHARDS) on a store of testQueueStore. */
export function testQueues(store: QueueConnection, prefix: string): EventQueues {
  return createEventQueues(store, prefix, TEST_QUEUE_SHARDS);
}

/** A queue prefix of this test's own, so tests never see each other's jobs. */
export function testPrefix(): string {
  return `test-${randomUUID().slice(0, 8)}`;
}

export function defaultSources(): Map<string, WebhookSource> {
  return new Map([['stripe', createStripeSource({ secrets: [STRIPE_SECRET], toleranceSeconds: 300 })]]);
}

/** Short timings, so recovery happens within a test's patience. */
export const FAST = { LEASE_MS: '2000', RETRY_BACKOFF_MS: '20', RECONCILE_INTERVAL_MS: '200', REQUEUE_AFTER_MS: '500', MAX_ATTEMPTS: '5' } as const;

/**
 * The environment of a test's ingest or worker, in-process or spawned: its database and
 * queue, the example shop loaded and pointed at a sandbox (or at a closed port), fast timings,
 * free ports. `extra` overrides anything.
 */
export function testEnv(opts: { databaseUrl: string; prefix: string; redisUrl?: string; sandboxUrl?: string; extra?: Record<string, string> }): Record<string, string> {
  const sandbox = opts.sandboxUrl ?? 'http://127.0.0.1:9';
  return {
    DATABASE_URL: opts.databaseUrl,
    REDIS_URL: opts.redisUrl ?? REDIS_URL,
    QUEUE_BACKEND: TEST_QUEUE_BACKEND,
    QUEUE_PREFIX: opts.prefix,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    PORT: '0',
    HOST: '127.0.0.1',
    METRICS_PORT: '0',
    METRICS_HOST: '127.0.0.1',
    ONCEHOOK_HANDLERS: 'examples/shop',
    SHOP_PAYMENT_API_URL: `${sandbox}/payment`,
    SHOP_EMAIL_API_URL: `${sandbox}/email`,
    SHOP_FULFILMENT_API_URL: `${sandbox}/fulfilment`,
    SHOP_OUTBOUND_TIMEOUT_MS: '1000',
    SHOP_OUTBOUND_RETRY_DELAY_MS: '20',
    ...(TEST_REDIS_CLUSTER && opts.redisUrl === undefined ? { REDIS_CLUSTER_NODES: TEST_REDIS_CLUSTER, QUEUE_SHARDS: String(TEST_QUEUE_SHARDS) } : {}),
    ...FAST,
    // A claim that takes longer than CLAIM_TIMEOUT_MS is answered 503 (a provider retries it):
    // right for production, but on a machine running the suite beside CPU hogs a commit can take
    // longer than the 750 ms default, and tests that deliver and expect 202 would be measuring
    // that. The deadline has its own test (backpressure.alone.test.ts sets it).
    CLAIM_TIMEOUT_MS: '10000',
    // No activity writes unless a test asks (admin-activity.test.ts): a flush every 10 s would
    // land in the statement counts the round-trip tests measure.
    ACTIVITY_FLUSH_MS: '0',
    ...opts.extra,
  };
}

/** The example shop's handlers, calling a sandbox (or a closed port: top-up flows need none). */
export function exampleHandlers(sandboxUrl = 'http://127.0.0.1:9'): Handler[] {
  return shopHandlers(
    createShopClients(
      shopSettings({
        SHOP_PAYMENT_API_URL: `${sandboxUrl}/payment`,
        SHOP_EMAIL_API_URL: `${sandboxUrl}/email`,
        SHOP_FULFILMENT_API_URL: `${sandboxUrl}/fulfilment`,
        SHOP_OUTBOUND_TIMEOUT_MS: '1000',
        SHOP_OUTBOUND_MAX_TRIES: '3',
        SHOP_OUTBOUND_RETRY_DELAY_MS: '20',
      }),
    ),
  );
}

export interface IngestHandle extends OncehookIngest {
  url: string;
}

export async function startIngest(opts: {
  databaseUrl: string;
  prefix: string;
  redisUrl?: string;
  sources?: Map<string, WebhookSource>;
  env?: Record<string, string>;
  faults?: Faults;
  metrics?: IngestMetrics;
  now?: () => Date;
  destinations?: readonly Destination[] | string;
  /** Default: testLog (silent unless TEST_SHOW_LOGS). */
  log?: Logger;
}): Promise<IngestHandle> {
  const config = loadIngestConfig(testEnv({ databaseUrl: opts.databaseUrl, prefix: opts.prefix, redisUrl: opts.redisUrl, extra: opts.env }));
  const ingest = buildIngest(config, {
    sources: opts.sources ?? defaultSources(),
    log: opts.log ?? testLog,
    faults: opts.faults ?? noFaults,
    metrics: opts.metrics ?? createIngestMetrics({ defaultMetrics: false }),
    now: opts.now,
    destinations: opts.destinations,
  });
  const { port } = await ingest.listen();
  return Object.assign(ingest, { url: `http://127.0.0.1:${port}` });
}

export async function startWorker(opts: {
  databaseUrl: string;
  prefix: string;
  redisUrl?: string;
  handlers?: readonly Handler[];
  /** Base URL of a sandbox for the example handlers (when `handlers` is not given). */
  sandboxUrl?: string;
  env?: Record<string, string>;
  faults?: Faults;
  metrics?: WorkerMetrics;
  /** Destinations run beside the handlers (loadDestinations). */
  destinations?: readonly Destination[];
  /** Default: testLog (silent unless TEST_SHOW_LOGS). */
  log?: Logger;
  /** Start the reconciler loop too (default: off; tests call reconciler.runOnce() when they want a pass). */
  reconciler?: boolean;
}): Promise<OncehookWorker> {
  const config = loadWorkerConfig(testEnv({ databaseUrl: opts.databaseUrl, prefix: opts.prefix, redisUrl: opts.redisUrl, sandboxUrl: opts.sandboxUrl, extra: opts.env }));
  const worker = buildWorker(config, opts.handlers ?? exampleHandlers(opts.sandboxUrl), {
    log: opts.log ?? testLog,
    faults: opts.faults ?? noFaults,
    metrics: opts.metrics ?? createWorkerMetrics({ defaultMetrics: false }),
    ...(opts.destinations ? { destinations: opts.destinations } : {}),
    // The scheduled backfill reads the providers' API keys from here.
    env: { ...process.env, ...opts.env },
  });
  await worker.start({ reconciler: opts.reconciler ?? false, metricsServer: false });
  return worker;
}

/** Reads the port an ingest process logged ("ingest listening on N"). */
export async function ingestUrl(service: { waitFor(pattern: RegExp, timeoutMs?: number): Promise<string> }): Promise<string> {
  const line = await service.waitFor(/ingest listening on \d+/);
  const port = /listening on (\d+)/.exec(line)?.[1];
  return `http://127.0.0.1:${port}`;
}

export async function ledgerSummary(pool: Pool): Promise<{ entries: number; perEvent: Map<string, number>; balance: number }> {
  const { rows } = await pool.query<{ source_event_id: string; n: number }>('SELECT source_event_id, count(*)::int AS n FROM ledger_entries GROUP BY source_event_id');
  const perEvent = new Map(rows.map((row) => [row.source_event_id, row.n]));
  const entries = rows.reduce((sum, row) => sum + row.n, 0);
  const balance = await pool.query<{ total: number }>('SELECT coalesce(sum(balance_cents), 0)::int AS total FROM ledger_accounts');
  return { entries, perEvent, balance: balance.rows[0]?.total ?? 0 };
}

/** Events by state. */
export async function stateCounts(pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM ${T.events} GROUP BY state`);
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}

/** The event's one handler run (most events in these tests have exactly one). */
export async function onlyRun(pool: Pool, provider: string, eventId: string) {
  const event = await q.getEventByKey(pool, provider, eventId);
  if (!event) return null;
  const runs = await q.getRuns(pool, event.id);
  if (runs.length !== 1) throw new Error(`expected one run of ${provider}/${eventId}, found ${runs.length}`);
  return { event, run: runs[0]! };
}

export const TRUNCATE_ALL = `TRUNCATE ${T.events}, ${T.versions}, ledger_entries, ledger_accounts, example_orders, example_customers CASCADE`;

/**
 * Puts an event into a given state by hand, as if a worker had run it: one run of `handler`
 * in `state` (with a lease when processing), the event's counters and state to match.
 */
export async function seedRun(
  pool: Pool,
  rowId: number,
  run: { handler?: string; state: 'received' | 'processing' | 'done' | 'failed'; attempts?: number; lastError?: string | null; leaseToken?: string; leaseMs?: number },
): Promise<number> {
  const processing = run.state === 'processing';
  const { rows } = await pool.query<{ id: number }>(
    `INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, last_error, lease_token, lease_until, finished_at)
     VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::int IS NULL THEN NULL ELSE now() + $7::int * interval '1 millisecond' END,
             CASE WHEN $3 IN ('done', 'failed') THEN now() END)
     RETURNING id`,
    [
      rowId,
      run.handler ?? 'shop.payments',
      run.state,
      run.attempts ?? 1,
      run.lastError ?? null,
      processing ? (run.leaseToken ?? '00000000-0000-4000-8000-000000000099') : null,
      processing ? (run.leaseMs ?? 60_000) : null,
    ],
  );
  const pending = run.state === 'received' || processing ? 1 : 0;
  const failed = run.state === 'failed' ? 1 : 0;
  await pool.query(
    `UPDATE ${T.events} SET runs_pending = $2, runs_failed = $3, state = CASE WHEN $2 > 0 THEN 'processing' WHEN $3 > 0 THEN 'failed' ELSE 'done' END,
            finished_at = CASE WHEN $2 = 0 THEN now() END WHERE id = $1`,
    [rowId, pending, failed],
  );
  return rows[0]!.id;
}

/** The engine, as the worker builds it (createEngine), for tests that drive processJob by hand. */
export function engine(pool: Pool, handlers: readonly Handler[], settings: Partial<ProcessSettings> = {}, extra: Partial<EngineOptions> = {}): Engine {
  return createEngine({
    pool,
    schema: DEFAULT_SCHEMA,
    handlers,
    log: testLog,
    ...extra,
    settings: { leaseMs: 60_000, retry: { maxAttempts: 5, backoffMs: 20 }, unhandled: 'done', ...settings },
  });
}

/** Claims a Stripe-shaped event directly, as ingest would; returns its row id. */
export async function claimStripe(pool: Pool, eventId: string, type: string, payload: Record<string, unknown> = {}): Promise<number> {
  const body = { id: eventId, object: 'event', type, created: Math.floor(Date.now() / 1000), data: { object: {} }, ...payload };
  const result = await q.claimEvent(pool, { source: 'stripe', kind: 'stripe', eventId, type, signedAt: new Date(), rawBody: JSON.stringify(body), payload: body, meta: {} });
  if (result.outcome !== 'new') throw new Error(`expected a new claim of ${eventId}`);
  return result.rowId;
}

/** The dispatch job of a Stripe event (what ingest enqueues). */
export function dispatchJob(rowId: number, eventId: string) {
  return { rowId, source: 'stripe', eventId, attempt: 0 };
}
