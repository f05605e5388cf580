/**
 * The bench's end-to-end measurement and the queue's own ceiling.
 *
 * End to end: an ingest and N workers on a fresh database; wallet top-ups (one local step
 * each), each delivered a mean of 3 times, pre-signed and fired by autocannon (the cheapest
 * load generator at hand: no signing or fetch objects per request in the measured window).
 * From the first delivery until every event is `done`, it measures events/s and, per event,
 * the CPU of every tier (costs.ts), Postgres transactions, statements, rows and WAL, and Redis
 * commands; and the claim-to-start latency (event received -> its handler run created).
 *
 * Queue ceiling: BullMQ alone on the same Redis: addBulk N jobs, then a no-op processor at
 * concurrency 32. What the queue can carry, printed beside what the pipeline carries.
 */
import { Queue, Worker } from 'bullmq';
import autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { copiesFor, paymentSucceeded, REDIS_URL, signStripe, spawnService, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { closeQueueConnection, createRedis, openQueueConnection, PostgresEventQueue, PostgresQueueWorker, type QueueBackend } from '@oncehook/core';
import { rssMb, settledDifference, snapshot, type Costs, type Subjects } from './costs.js';
import { createTestDatabaseOn } from './databases.js';
import type { Peer } from './peers.js';

/** The example shop, for the end-to-end top-ups (one local step; its APIs are not called). */
export const SHOP_ENV = {
  ONCEHOOK_HANDLERS: 'examples/shop',
  SHOP_PAYMENT_API_URL: 'http://127.0.0.1:9/payment',
  SHOP_EMAIL_API_URL: 'http://127.0.0.1:9/email',
  SHOP_FULFILMENT_API_URL: 'http://127.0.0.1:9/fulfilment',
};

export interface E2eRow {
  /** `this checkout`, `baseline` (another checkout, `--baseline-root`) or `postgres queue` (this checkout, QUEUE_BACKEND=postgres). */
  label: string;
  /** With `tables`: rows inserted, updated (of them HOT) and deleted per event, by table (the run's and the probes' events together). */
  rowsByTable?: Record<string, { inserted: number; updated: number; hot: number; deleted: number }>;
  queueBackend: QueueBackend;
  workers: number;
  events: number;
  deliveries: number;
  seconds: number;
  eventsPerSecond: number;
  /** Event received -> its handler run created (dispatch), median and 99th percentile, under the load (mostly the backlog). */
  claimToStartP50Ms: number;
  claimToStartP99Ms: number;
  /** The same for 100 events sent one every 20 ms to idle workers: what the enqueue path adds. */
  idleClaimToStartP50Ms: number;
  idleClaimToStartP99Ms: number;
  /** CPU ms per event by tier (ingest, workers, postgres, redis) and in total (load generator excluded). */
  cpuMsPerEvent: Record<'ingest' | 'workers' | 'postgres' | 'redis' | 'total', number>;
  /** Per event: Postgres transactions, statements (ingest + workers), rows written, WAL bytes; Redis commands. */
  perEvent: {
    transactions: number;
    statements: number;
    ingestStatements: number;
    workerStatements: number;
    /** Round trips to Postgres (a pipelined BEGIN + statement, or statement + COMMIT, is one). */
    ingestRoundTrips: number;
    workerRoundTrips: number;
    rowsWritten: number;
    walBytes: number;
    redisCommands: number;
  };
  workerRssMb: number[];
  /** pid -> process name (ingest, worker-1, ...), for the profiles. */
  pids: Record<number, string>;
  costs: Costs;
}

const round = (n: number, digits = 2) => Number(n.toFixed(digits));

/** The URL of a spawned ingest (its `listening on <port>` line). */
export async function listeningUrl(service: Service): Promise<string> {
  const line = await service.waitFor(/listening on \d+/);
  return `http://127.0.0.1:${/listening on (\d+)/.exec(line)?.[1]}`;
}

/** The n-th wallet top-up of a run (a Stripe payment_intent.succeeded of 100 cents the shop credits, 100 customers), signed now. */
export function topUp(id: string, n: number): { body: string; headers: Record<string, string> } {
  return signStripe(paymentSucceeded(id, { account: `cus_${n % 100}`, amount: 100 }));
}

/** Wallet top-ups (one local step each), each delivered a mean of 3 times (each copy signed anew), in shuffled order. */
function topUpDeliveries(idPrefix: string, events: number): { body: string; headers: Record<string, string> }[] {
  const deliveries: { body: string; headers: Record<string, string> }[] = [];
  for (let n = 0; n < events; n += 1) for (let k = copiesFor(); k > 0; k -= 1) deliveries.push(topUp(`${idPrefix}_${n}`, n));
  for (let i = deliveries.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
  }
  return deliveries;
}

/**
 * Pre-signed deliveries fired by autocannon (no signing in the measured window), in order and
 * round again: every delivery once at up to 50 connections, or for `durationSeconds` at
 * `connections`. `done` resolves with autocannon's result, `stop` ends the run early;
 * `onResponse` sees the count of answers so far (a fault script kills a process at a point).
 */
export function fire(
  url: string,
  deliveries: { body: string; headers: Record<string, string> }[],
  options: { onResponse?: (answered: number) => void; connections?: number; durationSeconds?: number } = {},
) {
  let next = 0;
  let answered = 0;
  let finish: (result: autocannon.Result) => void = () => {};
  const done = new Promise<autocannon.Result>((resolve) => {
    finish = resolve;
  });
  const { onResponse, durationSeconds } = options;
  const instance = autocannon(
    {
      url,
      connections: options.connections ?? Math.min(50, deliveries.length),
      ...(durationSeconds === undefined ? { amount: deliveries.length } : { duration: durationSeconds }),
      requests: [
        {
          method: 'POST',
          path: '/webhooks/stripe',
          setupRequest: (request) => {
            const d = deliveries[next % deliveries.length]!;
            next += 1;
            return { ...request, body: d.body, headers: { ...d.headers } };
          },
        },
      ],
    },
    (_error, result) => finish(result),
  );
  if (onResponse)
    instance.on('response', () => {
      answered += 1;
      onResponse(answered);
    });
  return { done, stop: () => instance.stop() };
}

/** Every delivery once (fire); throws on any non-2xx answer or error. */
export async function fireAll(url: string, deliveries: { body: string; headers: Record<string, string> }[]): Promise<void> {
  const answers = await fire(url, deliveries).done;
  if (answers.non2xx > 0 || answers.errors > 0) {
    const statuses = Object.entries(answers.statusCodeStats ?? {})
      .filter(([status]) => !status.startsWith('2'))
      .map(([status, { count }]) => `${count} x ${status}`);
    throw new Error(`end to end: ${answers.non2xx} non-2xx answers (${statuses.join(', ') || 'statuses not reported'}) and ${answers.errors} errors`);
  }
}

/**
 * Fires every delivery and polls `doneCount` meanwhile; the seconds from the first delivery
 * until `events` are done. Polled beside the firing, not after it: autocannon reports the end
 * of an `amount` run on its one-second tick, which would round every run up to a whole second.
 */
async function fireUntilDone(url: string, deliveries: { body: string; headers: Record<string, string> }[], events: number, doneCount: () => Promise<number>): Promise<number> {
  const started = performance.now();
  let failure: unknown = null;
  const firing = fireAll(url, deliveries).catch((error: unknown) => {
    failure = error;
  });
  let seconds = 0;
  while (failure === null) {
    if ((await doneCount()) >= events) {
      seconds = (performance.now() - started) / 1000;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await firing;
  if (failure !== null) throw failure;
  return seconds;
}

type Tiers = Record<'ingest' | 'workers' | 'postgres' | 'redis', number>;

/** CPU ms by tier: the process named ingest, those named worker-N, the database's backends (not the bench's own), Redis. */
function tiersOf(costs: Costs): Tiers {
  const sum = (pick: (name: string) => boolean) =>
    Object.entries(costs.cpuMs)
      .filter(([name]) => pick(name))
      .reduce((n, [, v]) => n + v, 0);
  return {
    ingest: sum((n) => n === 'ingest'),
    workers: sum((n) => n.startsWith('worker-')),
    // Every backend of the database but the bench's own statistics connection.
    postgres: sum((n) => n.startsWith('postgres') && n !== 'postgres (bench)'),
    redis: costs.cpuMs.redis ?? 0,
  };
}

function perEvent(tiers: Tiers, events: number): E2eRow['cpuMsPerEvent'] {
  return {
    ingest: round(tiers.ingest / events),
    workers: round(tiers.workers / events),
    postgres: round(tiers.postgres / events),
    redis: round(tiers.redis / events),
    total: round((tiers.ingest + tiers.workers + tiers.postgres + tiers.redis) / events),
  };
}

export interface EndToEndOptions {
  run: string;
  workers: number;
  events: number;
  env: Record<string, string>;
  /** For the Redis figures: the server, or every node of a cluster. */
  redis: Redis | readonly Redis[];
  /** Where ingest AND the workers find the queue (REDIS_URL, REDIS_CLUSTER_NODES, QUEUE_SHARDS); `env` is ingest's alone. */
  queueEnv?: Record<string, string>;
  /** QUEUE_PREFIX (default `bench-e2e-<tag>`; a Redis Cluster with one shard needs a braced one). */
  queuePrefix?: string;
  /** Collected for cleanup by the caller. */
  services: Service[];
  databases: string[];
  pools: Pool[];
  /** Write CPU profiles of ingest and the workers here (node --cpu-prof). */
  profileDir?: string;
  /** Read Postgres's row counts per table after the run (`--tables`): rowsByTable. */
  tables?: boolean;
  /** Run another checkout's ingest and workers (a baseline: `--baseline-root`). */
  root?: string;
  /** What the row is called: `this checkout`, `baseline` or `postgres queue`. */
  label: string;
  /** QUEUE_BACKEND of ingest and the workers (default redis). */
  queueBackend?: QueueBackend;
  /** How long to wait for Postgres's transaction and row counters to settle (costs.ts, settledDifference); default 11 s. */
  statsWaitMs?: number;
  /** More environment for the workers (a variant: another handler, a destination). */
  workerEnv?: Record<string, string>;
  /** More environment for the ingest (a variant: the delivery log off). */
  ingestEnv?: Record<string, string>;
}

/**
 * What a variant row adds to the plain top-up (`--variants`): the environment of its workers
 * and, where the variant is an ingest setting, of its ingest. One entry per variant.
 */
export const VARIANTS = {
  /** One more handler on the same event (one local step): fan-out. */
  fanout: { workers: { ONCEHOOK_HANDLERS: 'examples/shop,scripts/bench/variant-handlers.ts', BENCH_VARIANT: 'fanout' } },
  /** The same handler with a flow limit it never reaches (concurrency 64): flow control's bookkeeping. */
  limited: { workers: { ONCEHOOK_HANDLERS: 'examples/shop,scripts/bench/variant-handlers.ts', BENCH_VARIANT: 'limited' } },
  /** One more handler with one local and one external step (the call answers at once): what an external step costs. */
  external: { workers: { ONCEHOOK_HANDLERS: 'examples/shop,scripts/bench/variant-handlers.ts', BENCH_VARIANT: 'external' } },
  /** The same, its external step `final` (record, run done and event done in one statement). */
  'external-final': { workers: { ONCEHOOK_HANDLERS: 'examples/shop,scripts/bench/variant-handlers.ts', BENCH_VARIANT: 'external-final' } },
  /** A limited handler that reaches its limit (2 slots, a 30 ms step, then a final local step): its share of capacity. */
  flow: { workers: { ONCEHOOK_HANDLERS: 'examples/shop,scripts/bench/variant-handlers.ts', BENCH_VARIANT: 'flow' } },
  /** One destination: every event POSTed, signed, to a receiver in the bench process (variantEnv adds its DESTINATION_URL). */
  destination: { workers: { DESTINATION_NAME: 'bench-receiver', DESTINATION_SECRET: `whsec_${Buffer.from('oncehook-bench-destination-secret').toString('base64')}` } },
  /** The delivery log off (an ingest setting): its delta is minus what the log costs. */
  nolog: { workers: {}, ingest: { DELIVERY_LOG: 'off' } },
} as const satisfies Record<string, { workers: Record<string, string>; ingest?: Record<string, string> }>;
export type Variant = keyof typeof VARIANTS;

/** A variant's environments, as measureEndToEnd takes them; `receiverUrl` is where the destination variant forwards. */
export function variantEnv(variant: Variant, receiverUrl: string): { workerEnv: Record<string, string>; ingestEnv: Record<string, string> | undefined } {
  const entry: { workers: Record<string, string>; ingest?: Record<string, string> } = VARIANTS[variant];
  return { workerEnv: variant === 'destination' ? { ...entry.workers, DESTINATION_URL: receiverUrl } : entry.workers, ingestEnv: entry.ingest };
}

export async function measureEndToEnd(options: EndToEndOptions): Promise<E2eRow> {
  const { run, workers: workerCount, events, env, redis, services, databases, pools, profileDir, root } = options;
  const queueBackend = options.queueBackend ?? 'redis';
  // The row's label makes its database and queue prefix its own (this checkout, baseline, a variant ...).
  const tag = `${workerCount}_${options.label.replace(/[^a-z0-9]+/gi, '').toLowerCase()}_${run}`;
  const db = await createTestDatabaseOn(`oncehook_bench_e2e_${tag}`);
  databases.push(db.name);
  const prefix = options.queuePrefix ?? `bench-e2e-${tag}`;
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  // The figure is the cost of the work, not the answer to overload: on a loaded machine a
  // claim can wait past the 750 ms default deadline and be answered 503 (correctly: a provider
  // would retry), which autocannon does not. The deadline is set far past any such wait.
  const ingest = spawnService(
    'ingest',
    { ...env, CLAIM_TIMEOUT_MS: '30000', ...options.ingestEnv, ...options.queueEnv, DATABASE_URL: db.url, QUEUE_PREFIX: prefix, QUEUE_BACKEND: queueBackend },
    [],
    {
      nodeArgs,
      root,
    },
  );
  services.push(ingest);
  const url = await listeningUrl(ingest);
  const workers = Array.from({ length: workerCount }, () =>
    spawnService(
      'worker',
      {
        LOG_LEVEL: 'warn',
        METRICS_PORT: '0',
        DATABASE_URL: db.url,
        QUEUE_PREFIX: prefix,
        QUEUE_BACKEND: queueBackend,
        WORKER_CONCURRENCY: '16',
        DATABASE_POOL_SIZE: '10',
        ...SHOP_ENV,
        ...options.workerEnv,
        ...options.queueEnv,
      },
      [],
      { nodeArgs, root },
    ),
  );
  services.push(...workers);
  const metricsPorts = await Promise.all(workers.map(async (w) => Number(/worker metrics on (\d+)/.exec(await w.waitFor(/worker metrics on \d+/))?.[1])));
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
  const statsPool = createPool(db.url, { max: 1, applicationName: 'bench' });
  pools.push(statsPool);

  const deliveries = topUpDeliveries(`evt_e2e_${run}_${workerCount}`, events);

  const subjects: Subjects = {
    pool: statsPool,
    database: db.name,
    redis,
    processes: { ingest: ingest.pid, ...Object.fromEntries(workers.map((w, i) => [`worker-${i + 1}`, w.pid])) },
    metricsUrls: { ingest: `${url}/metrics`, ...Object.fromEntries(metricsPorts.map((port, i) => [`worker-${i + 1}`, `http://127.0.0.1:${port}/metrics`])) },
  };
  const before = await snapshot(subjects);
  const seconds = await fireUntilDone(url, deliveries, events, async () => {
    const { rows } = await statsPool.query<{ done: number }>(`SELECT count(*) FILTER (WHERE state = 'done')::int AS done FROM oncehook.events`);
    return rows[0]?.done ?? 0;
  });
  const costs = await settledDifference(before, subjects, options.statsWaitMs ?? 11_000);
  const latencySql = `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
       FROM (SELECT extract(epoch FROM r.created_at - e.received_at) * 1000 AS ms
               FROM oncehook.events e JOIN oncehook.handler_runs r ON r.event_row_id = e.id
              WHERE e.event_id LIKE $1) t`;
  const { rows: latency } = await statsPool.query<{ p50: number; p99: number }>(latencySql, [`evt_e2e_${run}_%`]);

  // Claim to start with workers that are not saturated: what the enqueue path itself adds.
  // 100 events, one every 20 ms, after the load (a saturated pipeline measures its backlog).
  const probes = Array.from({ length: 100 }, (_, n) =>
    signStripe({
      id: `evt_probe_${run}_${workerCount}_${n}`,
      object: 'event',
      type: 'payment_intent.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { amount: 1, amount_received: 1, currency: 'usd', customer: 'cus_probe' } },
    }),
  );
  for (const probe of probes) {
    const res = await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: probe.body, headers: probe.headers });
    await res.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  for (;;) {
    const { rows } = await statsPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.events WHERE state = 'done' AND event_id LIKE $1`, [`evt_probe_${run}_%`]);
    if ((rows[0]?.n ?? 0) >= probes.length) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  const { rows: idle } = await statsPool.query<{ p50: number; p99: number }>(latencySql, [`evt_probe_${run}_%`]);

  // Where the rows go, by table: the database is this run's own, so Postgres's counts since
  // its creation are the run's (the migrations' few rows aside). Read after every backend has
  // reported (PGSTAT_IDLE_INTERVAL: settledDifference's wait).
  let rowsByTable: E2eRow['rowsByTable'];
  if (options.tables) {
    await new Promise((resolve) => setTimeout(resolve, options.statsWaitMs ?? 11_000));
    const all = events + probes.length;
    const { rows } = await statsPool.query<{ name: string; ins: number; upd: number; hot: number; del: number }>(
      `SELECT schemaname || '.' || relname AS name, n_tup_ins::float8 AS ins, n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot, n_tup_del::float8 AS del
         FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC`,
    );
    rowsByTable = Object.fromEntries(
      rows.map((r) => [r.name, { inserted: round(r.ins / all), updated: round(r.upd / all), hot: round(r.hot / all), deleted: round(r.del / all) }]),
    );
  }

  const tiers = tiersOf(costs);
  const ingestStatements = costs.statements.ingest ?? 0;
  const ofWorkers = (counts: Record<string, number>) =>
    Object.entries(counts)
      .filter(([name]) => name.startsWith('worker-'))
      .reduce((n, [, v]) => n + v, 0);
  const workerStatements = ofWorkers(costs.statements);
  const row: E2eRow = {
    label: options.label,
    queueBackend,
    workers: workerCount,
    events,
    deliveries: deliveries.length,
    seconds: round(seconds),
    eventsPerSecond: Math.round(events / seconds),
    claimToStartP50Ms: round(latency[0]?.p50 ?? 0, 1),
    claimToStartP99Ms: round(latency[0]?.p99 ?? 0, 1),
    idleClaimToStartP50Ms: round(idle[0]?.p50 ?? 0, 1),
    idleClaimToStartP99Ms: round(idle[0]?.p99 ?? 0, 1),
    cpuMsPerEvent: perEvent(tiers, events),
    perEvent: {
      transactions: round(costs.transactions / events),
      statements: round((ingestStatements + workerStatements) / events),
      ingestStatements: round(ingestStatements / events),
      workerStatements: round(workerStatements / events),
      ingestRoundTrips: round((costs.roundTrips.ingest ?? 0) / events),
      workerRoundTrips: round(ofWorkers(costs.roundTrips) / events),
      rowsWritten: round(costs.rowsWritten / events),
      walBytes: Math.round(costs.walBytes / events),
      redisCommands: round(costs.redisCommands / events),
    },
    ...(rowsByTable ? { rowsByTable } : {}),
    workerRssMb: workers.map((w) => rssMb(w.pid)),
    pids: { [ingest.pid]: 'ingest', ...Object.fromEntries(workers.map((w, i) => [w.pid, `worker-${i + 1}`])) },
    costs,
  };
  await Promise.all([ingest, ...workers].map((s) => s.stop()));
  return row;
}

export interface QueueCeiling {
  jobs: number;
  addedPerSecond: number;
  processedPerSecond: number;
}

/**
 * BullMQ alone on the same Redis (or, with a database URL, Oncehook's queue table in that
 * database: postgres-queue.ts): addBulk `jobs` jobs (in chunks of 1000), then a no-op processor at concurrency 32.
 */
export async function measureQueueCeiling(prefix: string, jobs: number, postgresUrl?: string): Promise<QueueCeiling> {
  const defaultJobOptions = { removeOnComplete: { count: 1000 }, removeOnFail: true };
  let queue: Queue;
  let newWorker: (processor: () => Promise<void>) => Worker;
  let disconnect: () => Promise<void>;
  if (postgresUrl) {
    const store = openQueueConnection({ QUEUE_BACKEND: 'postgres', REDIS_URL, DATABASE_URL: postgresUrl, QUEUE_PREFIX: prefix }, 'worker', { poolSize: 34 });
    if (store.backend !== 'postgres') throw new Error('expected the postgres queue store');
    // Oncehook's own queue table (postgres-queue.ts), as QUEUE_BACKEND=postgres runs it.
    const pgQueue = new PostgresEventQueue(store.store, 'ceiling');
    queue = pgQueue as unknown as Queue;
    newWorker = (processor) => new PostgresQueueWorker(store.store, 'ceiling', processor, { concurrency: 32 }) as unknown as Worker;
    disconnect = () => closeQueueConnection(store);
  } else {
    const producer = createRedis(REDIS_URL, 'producer');
    const connection = createRedis(REDIS_URL, 'worker');
    queue = new Queue('ceiling', { connection: producer, prefix, defaultJobOptions });
    newWorker = (processor) => new Worker('ceiling', processor, { connection, prefix, concurrency: 32 });
    disconnect = async () => {
      producer.disconnect();
      connection.disconnect();
    };
  }
  try {
    const addStarted = performance.now();
    for (let i = 0; i < jobs; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ name: 'noop', data: { n: i + k }, opts: { jobId: `j-${i + k}` } })));
    }
    const addSeconds = (performance.now() - addStarted) / 1000;
    let processed = 0;
    let allDone: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      allDone = resolve;
    });
    const processStarted = performance.now();
    const worker = newWorker(async () => {
      processed += 1;
      if (processed === jobs) allDone();
    });
    await finished;
    await worker.close();
    const processSeconds = (performance.now() - processStarted) / 1000;
    return { jobs, addedPerSecond: Math.round(jobs / addSeconds), processedPerSecond: Math.round(jobs / processSeconds) };
  } finally {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    await disconnect();
  }
}

/** A peer pipeline's end-to-end row (scripts/bench/peers.ts): the same top-ups, no Oncehook. */
export interface PeerRow {
  peer: Peer;
  workers: number;
  events: number;
  deliveries: number;
  seconds: number;
  eventsPerSecond: number;
  cpuMsPerEvent: E2eRow['cpuMsPerEvent'];
  perEvent: { transactions: number; rowsWritten: number; walBytes: number; redisCommands: number };
  workerRssMb: number[];
}

/**
 * A peer (graphile-worker, BullMQ alone, pg-boss) through the same measurement as
 * measureEndToEnd: the same deliveries fired the same way, timed until every event's row is
 * done, CPU of its ingest, workers, database backends and Redis from /proc.
 */
export async function measurePeer(options: {
  peer: Peer;
  run: string;
  workers: number;
  events: number;
  env: Record<string, string>;
  redis: Redis;
  services: Service[];
  databases: string[];
  pools: Pool[];
  statsWaitMs?: number;
}): Promise<PeerRow> {
  const { peer, run, workers: workerCount, events, redis, services, databases, pools } = options;
  const db = await createTestDatabaseOn(`oncehook_bench_peer_${peer}_${workerCount}_${run}`);
  databases.push(db.name);
  const peerEnv = { ...options.env, DATABASE_URL: db.url, REDIS_URL, QUEUE_PREFIX: `bench-peer-${peer}-${workerCount}-${run}`, WORKER_CONCURRENCY: '16', DATABASE_POOL_SIZE: '10' };
  const setup = spawnService('peer', peerEnv, [peer, 'setup']);
  const { code } = await setup.exited;
  if (code !== 0) throw new Error(`peer ${peer} setup exited ${code}: ${setup.lines.slice(-5).join('\n')}`);
  const ingest = spawnService('peer', peerEnv, [peer, 'ingest']);
  services.push(ingest);
  const url = await listeningUrl(ingest);
  // The floor (inline) has no worker: its ingest does the work.
  const workers = Array.from({ length: peer === 'inline' ? 0 : workerCount }, () => spawnService('peer', peerEnv, [peer, 'worker']));
  services.push(...workers);
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
  const statsPool = createPool(db.url, { max: 1, applicationName: 'bench' });
  pools.push(statsPool);
  const deliveries = topUpDeliveries(`evt_peer_${peer}_${run}_${workerCount}`, events);
  const subjects: Subjects = {
    pool: statsPool,
    database: db.name,
    redis,
    processes: { ingest: ingest.pid, ...Object.fromEntries(workers.map((w, i) => [`worker-${i + 1}`, w.pid])) },
    metricsUrls: {},
  };
  const before = await snapshot(subjects);
  const seconds = await fireUntilDone(url, deliveries, events, async () => {
    const { rows } = await statsPool.query<{ done: number }>(`SELECT count(*)::int AS done FROM peer_events WHERE state = 'done'`);
    return rows[0]?.done ?? 0;
  });
  const costs = await settledDifference(before, subjects, options.statsWaitMs ?? 11_000);
  // A peer that credited an event twice (or not at all) would be measured doing other work.
  const { rows: credits } = await statsPool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_entries');
  if (credits[0]?.n !== events) throw new Error(`peer ${peer}: ${credits[0]?.n} ledger entries for ${events} events`);
  const row: PeerRow = {
    peer,
    workers: workerCount,
    events,
    deliveries: deliveries.length,
    seconds: round(seconds),
    eventsPerSecond: Math.round(events / seconds),
    cpuMsPerEvent: perEvent(tiersOf(costs), events),
    perEvent: {
      transactions: round(costs.transactions / events),
      rowsWritten: round(costs.rowsWritten / events),
      walBytes: Math.round(costs.walBytes / events),
      redisCommands: round(costs.redisCommands / events),
    },
    workerRssMb: workers.map((w) => rssMb(w.pid)),
  };
  await Promise.all([ingest, ...workers].map((s) => s.kill9()));
  return row;
}
