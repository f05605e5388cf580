/**
 * `npm run chaos -- [--events N] [--workers W] [--concurrency C] [--queue-shards S] [--queue-backend redis|postgres] [--redis-cluster] [--network-faults] [--limited-slots N]`
 *
 * Oncehook's promise under failure, as a command. On a Postgres and a Redis of its own (own
 * ports; the machine's shared servers are never touched), with ingest and W worker processes
 * and the sandbox effect APIs injecting faults, it delivers N events (Stripe order payments,
 * Standard Webhooks renewals, GitHub events) a mean of 3 times each, with concurrent
 * duplicates, retries, late redeliveries and forged copies, while it:
 *   - kill -9s random workers at random moments (and starts replacements),
 *   - kill -9s ingest once (and restarts it),
 *   - restarts Redis without persistence once (the queue is lost); with `--queue-backend
 *     postgres` there is no Redis: the queue lives in the Postgres that is restarted; with
 *     `--redis-cluster` the queue is on a Redis Cluster of its own (3 primaries, 3 replicas):
 *     the primary serving a shard is killed (its replica is promoted; unreplicated writes are
 *     lost), and later every shard slot of one primary is moved to another while events flow,
 *   - restarts Postgres once (immediate shutdown: connections cut mid-transaction);
 *   - with `--network-faults`, puts every process's links to Postgres and Redis behind a TCP
 *     proxy and, while sending, applies one episode after another: latency with jitter, a
 *     5 s stall (bytes stop, sockets stay open), a narrow link, every connection reset; after
 *     each stall it measures how long until the next event finishes.
 * A handler limited to 2 runs at once (a 30 ms call each; `--limited-slots` for a run too long
 * for 2 slots to keep up with, docs/reliability.md "100,000 events") and one paused until 60%
 * of the sending ride along. Then it waits for the system to drain, failing on a stall (no event
 * finished for `--drain-timeout-seconds`, default 180) or past a bound computed from what is
 * left (the pending events at three times the pace of the sending, every pending limited run
 * at a tenth of its slots' capacity), and checks:
 *   - every event whose delivery got a 2xx is `done`;
 *   - each event's effects were applied exactly once (ledger rows, charges, emails, shipments
 *     from the sandbox counters), and no key was applied twice;
 *   - no row and no effect for events that were only ever forged (never acknowledged);
 *   - the limited handler never had more calls in flight than its slots (the work API measures);
 *   - no process exited by itself.
 * It prints the figures (among them how well the limited handler used its slots while it had a
 * backlog, and the peak memory of every kind of process) and exits non-zero on any violation.
 */
import { type ChildProcess, spawn as spawnProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import {
  copiesFor,
  createScratchDatabase,
  freePort,
  makeEvent,
  maxAppliedPerKey,
  parseScriptArgs,
  PeakMemory,
  peakResidentMb,
  pidsWhoseCommandLine,
  countArg,
  pool,
  proportionalMb,
  ProviderSimulator,
  ROOT,
  SOURCE_NODE_ARGS,
  simulatorSourcesEnv,
  spawnService,
  startOwnPostgres,
  startOwnRedis,
  startOwnRedisCluster,
  startSandbox,
  startTcpProxy,
  storedIdOf,
  type Service,
  type SimEvent,
  type SimSource,
  type TcpProxy,
} from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { eventQueueNames, migrate, shardOf, type QueueBackend } from '@oncehook/core';

export interface ChaosOptions {
  events: number;
  workers: number;
  concurrency: number;
  /** QUEUE_SHARDS of every process (default 1). */
  queueShards?: number;
  /** QUEUE_BACKEND of every process (default redis; postgres: no Redis is started). */
  queueBackend?: QueueBackend;
  /**
   * On Redis: a Redis Cluster of 3 primaries and 3 replicas instead of one Redis
   * (REDIS_CLUSTER_NODES). Its big faults: a primary killed (its replica takes over; writes it
   * had not replicated are lost), and the slots of some shards moved to another primary while
   * events flow (MOVED, ASK, TRYAGAIN).
   */
  redisCluster?: boolean;
  /**
   * Longest wait WITHOUT PROGRESS while the system drains after the last delivery (default
   * 180 s): the drain fails on a stall, not on a slow machine. The whole drain is also bounded
   * by what the run sent and the limits it declared (drainBoundMs).
   */
  drainTimeoutMs?: number;
  /**
   * Network faults (NETWORK_EPISODES) on every ingest and worker process's links to Postgres and
   * to Redis, each through a TcpProxy of the harness, while events are sent. Not with a Redis
   * Cluster (its nodes announce their own addresses to the clients).
   */
  networkFaults?: boolean;
  /**
   * chaos.issue-limited's concurrency (default 2). Its 20% share of the events drains at about
   * 5 runs/s with 2 slots on this machine, so a 100,000-event run would spend over an hour on
   * that handler alone; a larger limit keeps it a limited handler, checked at the work API.
   */
  limitedSlots?: number;
  log?: (line: string) => void;
}

/**
 * The network faults of `--network-faults`, one episode after another while events are sent,
 * on the links from every ingest and worker process to Postgres and to the queue's Redis (each
 * through a TcpProxy of the harness): a stall (bytes stop, sockets stay open), latency with
 * jitter, every connection reset, a narrow link. The stall first: a short run meets it too.
 */
const NETWORK_EPISODES = [
  { kind: 'stall', ms: 5_000 },
  { kind: 'latency', ms: 4_000, faults: { latencyMs: 20, jitterMs: 40 } },
  { kind: 'reset', ms: 0 },
  { kind: 'bandwidth', ms: 3_000, faults: { bytesPerSecond: 256 * 1024 } },
] as const;

export interface NetworkReport {
  /** Episodes applied, by kind. */
  episodes: Record<string, number>;
  /** After each stall ended: ms until the next event finished (every process recovered by itself). */
  recoveryAfterStallMs: number[];
}

export interface ChaosReport {
  events: number;
  acknowledged: number;
  forgedOnly: number;
  deliveries: { total: number; ok2xx: number; client4xx: number; server5xx: number; network: number; invalidSent: number; invalidRejected: number };
  kills: { workers: number; ingest: number; redisRestarts: number; postgresRestarts: number; primaryFailovers: number; slotsMoved: number };
  /** reenqueued: the reconciler's adds, by reason; workerStartFailures: workers that exited before they were ready (started again). */
  recoveries: { reenqueued: Record<string, number>; workerStartFailures: number };
  effects: {
    charges: number;
    emails: number;
    shipments: number;
    ledgerEntries: number;
    fanoutIndex: number;
    fanoutNotify: number;
    fanoutPinged: number;
    sandboxFaults: number;
    sandboxReplays: number;
  };
  /** Flow control: runs of the limited handler, its slots (and the most the sandbox saw in flight), of the paused-then-resumed one, and how many waited for the resume. */
  flow: { limited: number; limitedSlots: number; limitedMaxInFlight: number; paused: number; waitingAtResume: number; limitedUse: LimitedUse | null; destination: number };
  /** With `networkFaults`: what was applied and how fast the processes recovered. */
  network: NetworkReport | null;
  /**
   * The most memory each kind of process had during the run, in MB: `ingest`, `worker` and
   * `receiver` are each the largest VmHWM of any process of that kind (workers are killed and
   * replaced: the largest of them all); `redis` the largest node's VmHWM; `postgres` the largest
   * sum of the PSS of all the server's processes seen in a sample (shared buffers once).
   */
  peakMemoryMb: Record<string, number>;
  sendMs: number;
  drainMs: number;
  violations: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The destination's signing secret (the workers sign with it, the receiver verifies with it). */
const DESTINATION_SECRET = `whsec_${Buffer.from('chaos-destination-secret-32-byte').toString('base64')}`;

/** chaos.issue-limited: at most `limitedSlots` (default 2) runs at once, each a 30 ms call (scripts/chaos/fanout-handlers.ts). */
const LIMITED = { name: 'chaos.issue-limited', callMs: 30 } as const;

/**
 * How well the concurrency-2 handler used its slots while it had a backlog, from one-second
 * samples of its runs: `backlogSeconds` are the seconds that began and ended with runs waiting
 * (more work than slots); `runsPerSecond` its runs ended in those seconds, per second;
 * `meanRunMs` one run from its lease to its end (the call, its renewals and records);
 * `slotUse` = runsPerSecond x meanRunMs / slots: the share of the backlog's time the slots held
 * a run (the gate's efficiency: 1 = no slot ever idle while a run waited); `callCapacityUse` =
 * runsPerSecond / (slots / call time): against what the 30 ms call alone would allow.
 */
export interface LimitedUse {
  backlogSeconds: number;
  runsPerSecond: number;
  meanRunMs: number;
  slotUse: number;
  callCapacityUse: number;
  mostWaiting: number;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const run = Math.random().toString(36).slice(2, 8);
  const violations: string[] = [];

  const queueBackend = options.queueBackend ?? 'redis';
  const limitedSlots = options.limitedSlots ?? 2;
  const onCluster = queueBackend === 'redis' && options.redisCluster === true;
  log(
    `chaos ${run}: ${options.events} events, ${options.workers} workers, concurrency ${options.concurrency}, ${options.queueShards ?? 1} queue shard(s) on ${onCluster ? 'a Redis Cluster (3 primaries, 3 replicas)' : queueBackend}`,
  );
  const cluster = onCluster ? await startOwnRedisCluster() : undefined;
  const redis = queueBackend === 'redis' && !cluster ? await startOwnRedis() : undefined;
  // One queue on a cluster needs a hash-tag prefix; several shards are each their own tag.
  const prefix = cluster && (options.queueShards ?? 1) <= 1 ? `{chaos-${run}}` : `chaos-${run}`;
  const postgres = await startOwnPostgres();
  // The processes' links (the run's own checks connect directly).
  const proxies: TcpProxy[] = [];
  if (options.networkFaults) {
    proxies.push(await startTcpProxy(postgres.port));
    if (redis) proxies.push(await startTcpProxy(redis.port));
  }
  const sandbox = await startSandbox();
  const services = new Set<Service>();
  let dbPool: Pool | undefined;
  let receiverPool: Pool | undefined;
  let receiver: ChildProcess | undefined;
  try {
    const database = await createScratchDatabase({ baseUrl: postgres.baseUrl });
    dbPool = createPool(database.url, { max: 4, connectionTimeoutMillis: 2_000 });
    await migrate(dbPool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
    // The fan-out handlers' effects (scripts/chaos/fanout-handlers.ts): one row per (handler, event).
    await dbPool.query('CREATE TABLE IF NOT EXISTS chaos_fanout (handler text NOT NULL, event_id text NOT NULL, at timestamptz NOT NULL DEFAULT now())');
    const db = dbPool;
    // A destination (docs/destinations.md): the GitHub events forwarded to the TypeScript example
    // receiver, in a process of its own with its own database (in the same Postgres: it goes
    // away with the restart too), deduplicating on webhook-id.
    const receiverDatabase = await createScratchDatabase({ baseUrl: postgres.baseUrl });
    receiverPool = createPool(receiverDatabase.url, { max: 2, connectionTimeoutMillis: 2_000 });
    const receiverProcess = spawnProcess(process.execPath, [...SOURCE_NODE_ARGS, 'examples/receivers/typescript/receiver.ts'], {
      cwd: ROOT,
      env: { ...process.env, WEBHOOK_SECRET: DESTINATION_SECRET, DATABASE_URL: receiverDatabase.url, PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    receiver = receiverProcess;
    let receiverOutput = '';
    receiverProcess.stdout?.on('data', (c: Buffer) => (receiverOutput += c.toString()));
    receiverProcess.stderr?.on('data', (c: Buffer) => (receiverOutput += c.toString()));
    const receiverPort = await new Promise<string>((resolve, reject) => {
      const timer = setInterval(() => {
        const port = /receiver listening on (\d+)/.exec(receiverOutput)?.[1];
        if (port) {
          clearInterval(timer);
          resolve(port);
        } else if (receiverProcess.exitCode !== null) {
          clearInterval(timer);
          reject(new Error(`the receiver exited: ${receiverOutput}`));
        }
      }, 50);
    });

    // Transient faults only: every one of them must be survived without a double effect.
    sandbox.faults([
      { service: 'payment', mode: 'apply_then_fail', probability: 0.05 },
      { service: 'payment', mode: 'delay', delayMs: 1_500, probability: 0.02 },
      { service: 'payment', mode: 'fail_before', probability: 0.03 },
      { service: 'email', mode: 'apply_then_fail', probability: 0.05 },
      { service: 'email', mode: 'status', status: 503, probability: 0.03 },
      { service: 'fulfilment', mode: 'apply_then_fail', probability: 0.05 },
      { service: 'fulfilment', mode: 'fail_before', probability: 0.03 },
    ]);

    const ingestPort = await freePort();
    const common = {
      DATABASE_URL: proxies[0] ? database.url.replace(`:${postgres.port}/`, `:${proxies[0].port}/`) : database.url,
      QUEUE_BACKEND: queueBackend,
      // Postgres-backed: a closed port, so a process that still talked to Redis would fail.
      REDIS_URL: redis ? (proxies[1] ? `redis://127.0.0.1:${proxies[1].port}` : redis.url) : 'redis://127.0.0.1:9',
      REDIS_CLUSTER_NODES: cluster?.seeds ?? '',
      QUEUE_PREFIX: prefix,
      QUEUE_SHARDS: String(options.queueShards ?? 1),
      LOG_LEVEL: 'info',
      DATABASE_POOL_SIZE: '10',
    };
    const ingestEnv = {
      ...common,
      PORT: String(ingestPort),
      HOST: '127.0.0.1',
      ...simulatorSourcesEnv(),
      DUPLICATE_REENQUEUE_AFTER_MS: '2000',
      ENQUEUE_TIMEOUT_MS: '500',
    };
    const workerEnv = {
      ...common,
      WORKER_CONCURRENCY: '16',
      METRICS_PORT: '0',
      LEASE_MS: '3000',
      RECONCILE_INTERVAL_MS: '500',
      REQUEUE_AFTER_MS: '2000',
      MAX_ATTEMPTS: '200',
      RETRY_BACKOFF_MS: '100',
      // The shop, and two handlers on GitHub issues.opened: every handler's effects exactly once.
      ONCEHOOK_HANDLERS: 'examples/shop,scripts/chaos/fanout-handlers.ts',
      SHOP_PAYMENT_API_URL: `${sandbox.url}/payment`,
      SHOP_EMAIL_API_URL: `${sandbox.url}/email`,
      SHOP_FULFILMENT_API_URL: `${sandbox.url}/fulfilment`,
      SHOP_OUTBOUND_TIMEOUT_MS: '1000',
      SHOP_OUTBOUND_RETRY_DELAY_MS: '50',
      CHAOS_WORK_URL: sandbox.url,
      CHAOS_LIMITED_SLOTS: String(limitedSlots),
      DESTINATION_NAME: 'chaos-receiver',
      DESTINATION_URL: `http://127.0.0.1:${receiverPort}/webhooks`,
      DESTINATION_SECRET,
      DESTINATION_SOURCES: 'github',
      DESTINATION_TYPES: 'issues.*',
    };
    // A process that exits by itself after it was ready crashed: a violation (checked after the
    // drain). One that exits before it was ready failed to start, which a worker does when its
    // queue's store is down at start (QUEUE_BACKEND=postgres during the Postgres restart): a
    // supervisor (compose's restart policy, Kubernetes) starts it again, and so does this one.
    const ready = new WeakSet<Service>();
    let startFailures = 0;
    let ending = false;
    const spawn = (kind: 'ingest' | 'worker'): Service => {
      const service = spawnService(kind, kind === 'ingest' ? ingestEnv : workerEnv);
      services.add(service);
      service.waitFor(kind === 'ingest' ? /ingest listening/ : /worker ready/, 300_000).then(
        () => ready.add(service),
        () => {},
      );
      if (kind === 'worker') {
        void service.exited.then(async ({ code }) => {
          if (code === null || ending || ready.has(service)) return;
          startFailures += 1;
          log(`  worker ${service.pid} failed to start (exit ${code}); starting another, as a supervisor would`);
          await sleep(1_000);
          if (ending) return;
          const index = workers.indexOf(service);
          if (index !== -1) workers.splice(index, 1, spawn('worker'));
        });
      }
      return service;
    };
    /** The reconciler's re-enqueues, by the reason it logged (`re-enqueued (<why>)`). */
    const reenqueuedLines = () => {
      const byReason: Record<string, number> = {};
      for (const service of services) {
        for (const line of service.lines) {
          const why = /re-enqueued \(([^)]*)\)/.exec(line)?.[1];
          if (why) byReason[why] = (byReason[why] ?? 0) + 1;
        }
      }
      return byReason;
    };

    // Flow control: chaos.issue-paused is paused before anything arrives, resumed mid-way.
    const cli = async (args: string[]): Promise<boolean> => {
      const run = spawnService('cli', workerEnv, args);
      const { code } = await run.exited;
      if (code !== 0) log(`  oncehook ${args.join(' ')} exited ${code}: ${run.lines.slice(-3).join(' | ').slice(0, 400)}`);
      return code === 0;
    };
    if (!(await cli(['pause', 'handler', 'chaos.issue-paused', '--reason', 'chaos: paused until 60% of the sending', '--actor', 'chaos']))) {
      violations.push('oncehook pause failed');
    }
    let pausedRunsAtResume = -1;

    let ingest = spawn('ingest');
    await ingest.waitFor(/ingest listening/);
    const workers: Service[] = [];
    for (let i = 0; i < options.workers; i += 1) workers.push(spawn('worker'));
    await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));

    // The events: 40% Stripe order payments, 40% Standard Webhooks renewals, 20% GitHub; plus
    // forged-only events (2%, at least 3) that must never leave a trace.
    const sources: SimSource[] = ['stripe', 'stripe', 'standard-webhooks', 'standard-webhooks', 'github'];
    const events: SimEvent[] = Array.from({ length: options.events }, (_, n) => makeEvent(sources[n % sources.length]!, n, run));
    const forgedCount = Math.max(3, Math.floor(options.events * 0.02));
    for (let n = 0; n < forgedCount; n += 1) events.splice(Math.floor(Math.random() * events.length), 0, makeEvent(sources[n % 3]!, 1_000_000 + n, run, true));

    const simulator = new ProviderSimulator({ baseUrl: `http://127.0.0.1:${ingestPort}`, timeoutMs: 5_000, maxTries: 40, retryBaseMs: 100, retryMaxMs: 2_000 });
    const kills = { workers: 0, ingest: 0, redisRestarts: 0, postgresRestarts: 0, primaryFailovers: 0, slotsMoved: 0 };
    let reshard: Promise<void> = Promise.resolve();
    let started = 0;
    let sending = true;

    // The chaos monkey: random worker kills throughout; each big fault once, at a point of progress.
    const monkey = (async () => {
      const redisFaults: [number, string][] = redis
        ? [[0.5, 'redis']]
        : cluster
          ? [
              [0.4, 'failover'],
              [0.55, 'reshard'],
            ]
          : [];
      const milestones: [number, string][] = [[0.25, 'ingest'], ...redisFaults, [0.6, 'resume'], [0.75, 'postgres']];
      let nextWorkerKill = performance.now() + 1_000 + Math.random() * 2_000;
      // A big fault still due when the sending ends (a fault can take seconds: a failover waits
      // for the promotion) happens then, during the late redeliveries and the drain.
      // At least one worker is killed too, whatever the timing (a short run on a loaded machine
      // can end its sending while a failover is still being waited for).
      while (sending || milestones.length > 0 || kills.workers === 0) {
        await sleep(100);
        const progress = sending ? started / events.length : 1;
        const due = milestones[0];
        if (due && progress >= due[0]) {
          milestones.shift();
          if (due[1] === 'ingest') {
            log('  kill -9 ingest');
            await ingest.kill9();
            kills.ingest += 1;
            ingest = spawn('ingest');
            await ingest.waitFor(/ingest listening/);
          } else if (due[1] === 'resume') {
            const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.handler_runs WHERE handler = 'chaos.issue-paused' AND state <> 'received'`);
            if (rows[0]!.n > 0) violations.push(`${rows[0]!.n} run(s) of the paused handler chaos.issue-paused started while it was paused`);
            pausedRunsAtResume = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.handler_runs WHERE handler = 'chaos.issue-paused'`)).rows[0]!.n;
            log(`  resume chaos.issue-paused (${pausedRunsAtResume} runs waiting)`);
            for (let tries = 0; !(await cli(['resume', 'handler', 'chaos.issue-paused', '--reason', 'chaos: resumed'])); tries += 1) {
              if (tries >= 5) {
                violations.push('oncehook resume failed 6 times');
                break;
              }
              await sleep(1_000);
            }
          } else if (due[1] === 'failover' && cluster) {
            // The primary serving shard 0's queue: its jobs are the ones in flight there.
            const slot = await cluster.slotOf(`${prefix}:${eventQueueNames(options.queueShards ?? 1)[0]}:wait`);
            const victim = await cluster.killPrimary(slot);
            log(`  kill -9 the Redis primary ${victim} (slot ${slot}); its replica took over`);
            kills.primaryFailovers += 1;
          } else if (due[1] === 'reshard' && cluster) {
            // Every shard served by the first primary moves to the next one, keys and all,
            // while deliveries and workers keep going (in the background: the monkey goes on).
            const [from, to] = await cluster.primaries();
            const slots: number[] = [];
            for (const name of eventQueueNames(options.queueShards ?? 1)) {
              const slot = await cluster.slotOf(`${prefix}:${name}:wait`);
              if ((await cluster.primaryOf(slot)) === from) slots.push(slot);
            }
            log(`  moving ${slots.length} shard slot(s) from ${from} to ${to}`);
            reshard = cluster.moveSlots(slots, to!).then(() => {
              kills.slotsMoved += slots.length;
            });
          } else if (due[1] === 'redis' && redis) {
            log('  kill -9 redis (no persistence), restart empty');
            await redis.kill9();
            await redis.start();
            kills.redisRestarts += 1;
          } else {
            log('  stop postgres (immediate), start again');
            await postgres.stop('immediate');
            await sleep(500);
            await postgres.start();
            kills.postgresRestarts += 1;
          }
        }
        if ((sending || kills.workers === 0) && performance.now() >= nextWorkerKill) {
          const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0]!;
          await victim.kill9();
          kills.workers += 1;
          workers.push(spawn('worker'));
          nextWorkerKill = performance.now() + 1_000 + Math.random() * 3_000;
        }
      }
    })();

    // Network faults: one episode after another while sending, on every process's links.
    const network: NetworkReport = { episodes: {}, recoveryAfterStallMs: [] };
    const doneEvents = async () =>
      (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.events WHERE state = 'done'`).catch(() => ({ rows: [{ n: -1 }] }))).rows[0]!.n;
    const networkMonkey = (async () => {
      if (proxies.length === 0) return;
      await sleep(1_500);
      for (let i = 0; sending; i += 1) {
        const episode = NETWORK_EPISODES[i % NETWORK_EPISODES.length]!;
        network.episodes[episode.kind] = (network.episodes[episode.kind] ?? 0) + 1;
        if (episode.kind === 'reset') {
          log('  network: every connection to Postgres and Redis reset');
          for (const proxy of proxies) proxy.reset();
        } else if (episode.kind === 'stall') {
          log(`  network: Postgres and Redis stalled for ${episode.ms} ms (sockets open, no bytes)`);
          for (const proxy of proxies) proxy.stall();
          await sleep(episode.ms);
          const before = await doneEvents();
          for (const proxy of proxies) proxy.resume();
          const resumed = performance.now();
          // Recovered when the next event finishes (events keep arriving: there is work).
          while (performance.now() - resumed < 120_000 && (await doneEvents()) <= before) await sleep(20);
          const ms = Math.round(performance.now() - resumed);
          network.recoveryAfterStallMs.push(ms);
          log(`  network: resumed; the next event finished ${ms} ms later`);
        } else {
          log(`  network: ${episode.kind} ${JSON.stringify(episode.faults)} for ${episode.ms} ms`);
          for (const proxy of proxies) proxy.setFaults(episode.faults);
          await sleep(episode.ms);
          for (const proxy of proxies) proxy.setFaults({});
        }
        await sleep(1_000);
      }
    })();

    // The limited handler's runs, sampled once a second (done, and waiting to start).
    const samples: { done: number; waiting: number }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await db
          .query<{ done: number; waiting: number }>(
            `SELECT count(*) FILTER (WHERE state = 'done')::int AS done, count(*) FILTER (WHERE state = 'received')::int AS waiting
               FROM oncehook.handler_runs WHERE handler = $1`,
            [LIMITED.name],
          )
          .catch(() => ({ rows: [] }));
        if (rows[0]) samples.push(rows[0]);
        else samples.push({ done: -1, waiting: -1 }); // Postgres restarting: a hole in the samples
        await sleep(1_000);
      }
    })();

    // The peak memory of every kind of process, sampled every 3 s while the run lasts (a
    // node process's and Redis's VmHWM is the kernel's own peak: a sample sees it after the fact;
    // Postgres's total is as of each sample).
    const memory = new PeakMemory();
    const redisPorts = new Set([redis?.port, ...(cluster?.nodes.map((node) => node.port) ?? [])].filter((port) => port !== undefined));
    const memorySampler = (async () => {
      while (sampling) {
        for (const service of services) {
          if (service.proc.exitCode === null && service.proc.signalCode === null) memory.note(service.kind, peakResidentMb(service.pid));
        }
        memory.note('receiver', peakResidentMb(receiverProcess.pid));
        const redisPids = pidsWhoseCommandLine((line) => redisPorts.has(Number(/^redis-server \S*:(\d+)/.exec(line)?.[1])));
        for (const pid of redisPids) memory.note('redis', peakResidentMb(pid));
        const postgresPids = pidsWhoseCommandLine((line) => /^(\S*\/bin\/postgres|postgres:) /.test(line) && line.includes(postgres.name));
        memory.note('postgres', proportionalMb(postgresPids));
        await sleep(3_000);
      }
    })();

    const sendStarted = performance.now();
    await pool(events, options.concurrency, async (event) => {
      started += 1;
      await simulator.deliverEvent(event, event.forged ? 1 : copiesFor());
    });
    // Late redeliveries: a tenth of the events again, after everything else.
    const late = events.filter((e) => !e.forged && Math.random() < 0.1);
    await pool(late, options.concurrency, (event) => simulator.deliverOnce(event).then(() => {}));
    const sendMs = performance.now() - sendStarted;
    sending = false;
    await monkey;
    await networkMonkey;
    await reshard;
    log(`  sent in ${(sendMs / 1000).toFixed(1)} s; waiting for the drain`);

    // Drain: no row left received or processing. It fails on a stall (no event finished for
    // drainTimeoutMs), or past a bound that follows the work left: the pending events at the
    // pace this machine kept while sending (time per event sent), three times over, plus every
    // pending limited run at a tenth of its slots' capacity, plus the stall allowance. A slow
    // machine takes longer and passes; a stuck system fails.
    const drainStarted = performance.now();
    const stallMs = options.drainTimeoutMs ?? 180_000;
    const left = (
      await db
        .query<{ events: number; limited: number }>(
          `SELECT (SELECT count(*) FROM oncehook.events WHERE state IN ('received', 'processing'))::int AS events,
                  (SELECT count(*) FROM oncehook.handler_runs WHERE handler = $1 AND state IN ('received', 'processing'))::int AS limited`,
          [LIMITED.name],
        )
        .catch(() => ({ rows: [{ events: events.length, limited: 0 }] }))
    ).rows[0]!;
    const perEventMs = sendMs / events.length;
    const drainBound = stallMs + Math.ceil(left.events * perEventMs * 3) + Math.ceil((left.limited * LIMITED.callMs * 10) / limitedSlots);
    let lastPending = Number.POSITIVE_INFINITY;
    let lastProgress = performance.now();
    for (;;) {
      const { rows } = await db
        .query<{ pending: number }>(`SELECT count(*)::int AS pending FROM oncehook.events WHERE state IN ('received', 'processing')`)
        .catch(() => ({ rows: [{ pending: -1 }] }));
      const pending = rows[0]?.pending ?? -1;
      if (pending === 0) break;
      if (pending >= 0 && pending < lastPending) {
        lastPending = pending;
        lastProgress = performance.now();
      }
      const stalled = performance.now() - lastProgress > stallMs;
      if (stalled || performance.now() - drainStarted > drainBound) {
        violations.push(
          stalled
            ? `not drained: no event finished for ${stallMs} ms, ${pending} events still received/processing`
            : `not drained within ${drainBound} ms (${stallMs} ms, plus ${left.events} pending events at 3 x ${perEventMs.toFixed(1)} ms, the pace of the sending, plus ${left.limited} limited runs at a tenth of their slots' capacity): ${pending} events still received/processing`,
        );
        // Where they are stuck: the runs' states and attempts, and each event's queue shard.
        const { rows: stuck } = await db
          .query<{ provider: string; event_id: string; state: string; runs: string }>(
            `SELECT e.provider, e.event_id, e.state, coalesce(string_agg(r.handler || ':' || r.state || '#' || r.attempts, ' '), 'no runs') AS runs
               FROM oncehook.events e LEFT JOIN oncehook.handler_runs r ON r.event_row_id = e.id
              WHERE e.state IN ('received', 'processing') GROUP BY e.id LIMIT 10`,
          )
          .catch(() => ({ rows: [] }));
        for (const row of stuck)
          log(`  stuck: ${row.provider}/${row.event_id} ${row.state} (shard ${shardOf({ source: row.provider, eventId: row.event_id }, options.queueShards ?? 1)}): ${row.runs}`);
        // What the live processes last complained about (queue errors, reconciler failures), and
        // what their database connections are doing.
        for (const service of services) {
          if (service.proc.exitCode !== null || service.proc.signalCode !== null) continue;
          const complaints = service.lines.filter((line) => /"level":(40|50|60)/.test(line)).slice(-3);
          for (const line of complaints) log(`  ${service.kind} ${service.pid}: ${line.slice(0, 400)}`);
          log(`  ${service.kind} ${service.pid}: ${service.lines.length} lines logged, last: ${(service.lines.at(-1) ?? '').slice(0, 300)}`);
        }
        const { rows: activity } = await db
          .query<{ app: string; state: string; wait: string; n: number; oldest: string }>(
            `SELECT application_name AS app, coalesce(state, '') AS state, coalesce(wait_event_type || ':' || wait_event, '') AS wait, count(*)::int AS n,
                    coalesce(max(now() - xact_start)::text, '') AS oldest
               FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1, 2, 3 ORDER BY 1, 2`,
          )
          .catch(() => ({ rows: [] }));
        for (const row of activity) log(`  postgres: ${row.n} x ${row.app} ${row.state} ${row.wait} (oldest transaction ${row.oldest || 'none'})`);
        break;
      }
      await sleep(250);
    }
    const drainMs = performance.now() - drainStarted;
    sampling = false;
    await sampler;
    await memorySampler;
    ending = true;
    // A process that exited without being killed by the monkey, after it was ready, crashed.
    for (const service of services) {
      if (service.proc.exitCode === null || service.proc.signalCode === 'SIGKILL' || !ready.has(service)) continue;
      violations.push(
        `${service.kind} ${service.pid} exited by itself (code ${service.proc.exitCode}); its last lines:\n    ${service.lines.slice(-8).join('\n    ').slice(0, 3000)}`,
      );
    }

    // ---- checks -------------------------------------------------------------------------
    const outcomes = [...simulator.outcomes.values()];
    const { rows: eventRows } = await db.query<{ provider: string; event_id: string; state: string }>(`SELECT provider, event_id, state FROM oncehook.events`);
    const rowByKey = new Map(eventRows.map((r) => [`${r.provider}/${r.event_id}`, r]));
    const stats = sandbox.stats();
    const chargesBySubscription = new Map<string, number>();
    for (const e of stats.payment.effects) {
      const description = String((e as { description?: unknown }).description ?? '');
      chargesBySubscription.set(description, (chargesBySubscription.get(description) ?? 0) + 1);
    }
    const count = (list: Record<string, unknown>[], field: string) => {
      const map = new Map<string, number>();
      for (const e of list) map.set(String(e[field]), (map.get(String(e[field])) ?? 0) + 1);
      return map;
    };
    const emailsTo = count(stats.email.effects, 'to');
    const shipmentsFor = count(stats.fulfilment.effects, 'order_id');
    const { rows: ledgerRows } = await db.query<{ source_event_id: string; n: number }>(`SELECT source_event_id, count(*)::int AS n FROM ledger_entries GROUP BY source_event_id`);
    const ledgerBySource = new Map(ledgerRows.map((r) => [r.source_event_id, r.n]));
    const { rows: fanoutRows } = await db.query<{ handler: string; event_id: string; n: number }>(
      `SELECT handler, event_id, count(*)::int AS n FROM chaos_fanout GROUP BY handler, event_id`,
    );
    const fanout = new Map(fanoutRows.map((r) => [`${r.handler}/${r.event_id}`, r.n]));
    // The destination's receiver: what it applied, per event, and that it died of nothing.
    const { rows: creditRows } = await receiverPool.query<{ event_id: string; n: number }>('SELECT event_id, count(*)::int AS n FROM credits GROUP BY event_id');
    const credits = new Map(creditRows.map((r) => [r.event_id, r.n]));
    if (receiverProcess.exitCode !== null) {
      // Why it died, in one line (its last words: the stack's first line).
      const lines = receiverOutput.trim().split('\n');
      const last = lines.find((line) => /Error|error/.test(line)) ?? lines.at(-1) ?? '';
      violations.push(`the destination's receiver exited (${receiverProcess.exitCode}): ${last.slice(0, 300)}`);
    }

    for (const [name, service] of Object.entries(stats)) {
      if (maxAppliedPerKey(service) > 1) violations.push(`${name}: an idempotency key was applied ${maxAppliedPerKey(service)} times`);
    }
    // Flow control: the limited handler never had more calls in flight than its slots (the sandbox
    // measured), each applied once; the paused one did not start before its resume (checked then).
    const limitedWork = sandbox.sandbox.workStats()['chaos-limited'];
    // chaos.issue-notify's final external step: each done event's call applied once, under the key
    // its step recorded (the record, the run's done and the event's in one statement).
    const pingWork = sandbox.sandbox.workStats()['chaos-ping'];
    const { rows: pingRows } = await db.query<{ event_id: string; key: string }>(
      `SELECT e.event_id, s.idempotency_key AS key FROM oncehook.steps s
         JOIN oncehook.handler_runs r ON r.id = s.run_id JOIN oncehook.events e ON e.id = r.event_row_id
        WHERE r.handler = 'chaos.issue-notify' AND s.name = 'ping'`,
    );
    const pingKeys = new Map(pingRows.map((r) => [r.event_id, r.key]));
    const pingsApplied = Object.keys(pingWork?.appliedByKey ?? {}).length;
    if (pingsApplied !== pingRows.length) violations.push(`chaos.issue-notify: ${pingsApplied} final calls applied, ${pingRows.length} recorded`);
    if (limitedWork && limitedWork.maxInFlight > limitedSlots)
      violations.push(`chaos.issue-limited (concurrency ${limitedSlots}): the sandbox saw ${limitedWork.maxInFlight} calls in flight at once`);
    if (limitedWork && Object.values(limitedWork.appliedByKey).some((n) => n > 1)) violations.push('chaos.issue-limited: a work call was applied twice');
    if (pausedRunsAtResume < 0) violations.push('the paused handler was never resumed');
    const { rows: limitedRuns } = await db.query<{ mean: number | null }>(
      `SELECT avg(extract(epoch FROM a.ended_at - a.started_at))::float8 * 1000 AS mean
         FROM oncehook.attempt_history a JOIN oncehook.handler_runs r ON r.id = a.run_id
        WHERE r.handler = $1 AND a.outcome = 'done'`,
      [LIMITED.name],
    );
    const limitedUse = useOfSlots(samples, limitedRuns[0]?.mean ?? null, limitedSlots);

    let acknowledged = 0;
    for (const outcome of outcomes) {
      const { event } = outcome;
      const row = rowByKey.get(`${event.source}/${storedIdOf(event)}`);
      if (event.forged) {
        if (row) violations.push(`${event.key}: forged-only event has a row`);
        if (outcome.invalidAnswers.some((a) => typeof a === 'number' && a < 300)) violations.push(`${event.key}: a forged delivery got a 2xx`);
      }
      if (outcome.acknowledged) acknowledged += 1;
      if (outcome.acknowledged && row?.state !== 'done') violations.push(`${event.key}: acknowledged but ${row ? row.state : 'has no row'}`);
      if (!event.forged && outcome.invalidAnswers.some((a) => typeof a === 'number' && a < 300)) violations.push(`${event.key}: an invalid delivery got a 2xx`);

      // Effects: exactly once for events that exist and are done, none for those with no row.
      const body = JSON.parse(event.body) as { data?: { object?: { receipt_email?: string; metadata?: { order_id?: string } }; subscription_id?: string } };
      const expected = row?.state === 'done' ? 1 : row ? -1 : 0; // -1: not finished (already a violation if acknowledged)
      if (expected < 0) continue;
      if (event.source === 'stripe') {
        const orderId = body.data?.object?.metadata?.order_id ?? '';
        const email = body.data?.object?.receipt_email ?? '';
        if ((emailsTo.get(email) ?? 0) !== expected) violations.push(`${event.key}: ${emailsTo.get(email) ?? 0} receipts (expected ${expected})`);
        if ((shipmentsFor.get(orderId) ?? 0) !== expected) violations.push(`${event.key}: ${shipmentsFor.get(orderId) ?? 0} shipments (expected ${expected})`);
        if ((ledgerBySource.get(orderId) ?? 0) !== expected) violations.push(`${event.key}: ${ledgerBySource.get(orderId) ?? 0} ledger entries (expected ${expected})`);
      } else if (event.source === 'standard-webhooks') {
        const subscription = body.data?.subscription_id ?? '';
        const charges = chargesBySubscription.get(`Renewal of ${subscription}`) ?? 0;
        if (charges !== expected) violations.push(`${event.key}: ${charges} charges (expected ${expected})`);
        const entries = ledgerBySource.get(`renewal:${subscription}:${event.id}`) ?? 0;
        if (entries !== expected) violations.push(`${event.key}: ${entries} ledger entries (expected ${expected})`);
      } else if (event.source === 'github') {
        // Fan-out: each of the two handlers exactly once, whatever the other one did.
        for (const handler of ['index', 'notify', 'limited', 'paused']) {
          const n = fanout.get(`${handler}/${storedIdOf(event)}`) ?? 0;
          if (n !== expected) violations.push(`${event.key}: ${n} ${handler} rows (expected ${expected}; fan-out handler chaos.issue-${handler})`);
        }
        const pingKey = pingKeys.get(storedIdOf(event));
        const pinged = pingKey === undefined ? 0 : (pingWork?.appliedByKey[pingKey] ?? 0);
        if (pinged !== expected) violations.push(`${event.key}: chaos.issue-notify's final call applied ${pinged} times under its recorded key (expected ${expected})`);
        const received = credits.get(storedIdOf(event)) ?? 0;
        if (received !== expected) violations.push(`${event.key}: applied ${received} times by the destination's receiver (expected ${expected})`);
      }
    }

    const answers = outcomes.flatMap((o) => o.answers);
    const invalid = outcomes.flatMap((o) => o.invalidAnswers);
    const report: ChaosReport = {
      events: options.events,
      acknowledged,
      forgedOnly: forgedCount,
      deliveries: {
        total: answers.length,
        ok2xx: answers.filter((a) => typeof a === 'number' && a < 300).length,
        client4xx: answers.filter((a) => typeof a === 'number' && a >= 400 && a < 500).length,
        server5xx: answers.filter((a) => typeof a === 'number' && a >= 500).length,
        network: answers.filter((a) => typeof a !== 'number').length,
        invalidSent: invalid.length,
        invalidRejected: invalid.filter((a) => typeof a === 'number' && (a === 400 || a === 401)).length,
      },
      kills,
      recoveries: { reenqueued: reenqueuedLines(), workerStartFailures: startFailures },
      effects: {
        charges: stats.payment.applied,
        emails: stats.email.applied,
        shipments: stats.fulfilment.applied,
        ledgerEntries: ledgerRows.reduce((n, r) => n + r.n, 0),
        fanoutIndex: fanoutRows.filter((r) => r.handler === 'index').reduce((n, r) => n + r.n, 0),
        fanoutNotify: fanoutRows.filter((r) => r.handler === 'notify').reduce((n, r) => n + r.n, 0),
        fanoutPinged: pingsApplied,
        sandboxFaults: stats.payment.faults + stats.email.faults + stats.fulfilment.faults,
        sandboxReplays: stats.payment.replays + stats.email.replays + stats.fulfilment.replays,
      },
      flow: {
        limited: fanoutRows.filter((r) => r.handler === 'limited').reduce((n, r) => n + r.n, 0),
        limitedSlots,
        limitedMaxInFlight: limitedWork?.maxInFlight ?? 0,
        paused: fanoutRows.filter((r) => r.handler === 'paused').reduce((n, r) => n + r.n, 0),
        destination: creditRows.reduce((n, r) => n + r.n, 0),
        waitingAtResume: pausedRunsAtResume,
        limitedUse,
      },
      network: proxies.length > 0 ? network : null,
      peakMemoryMb: memory.peaks(),
      sendMs: Math.round(sendMs),
      drainMs: Math.round(drainMs),
      violations,
    };
    return report;
  } finally {
    await Promise.all([...services].map((s) => s.kill9()));
    receiver?.kill('SIGKILL');
    await receiverPool?.end().catch(() => {});
    await dbPool?.end().catch(() => {});
    await sandbox.close();
    for (const proxy of proxies) await proxy.close();
    await redis?.kill9();
    await cluster?.stop();
    await postgres.destroy();
  }
}

/** LimitedUse from the one-second samples and the mean run; null when the handler never had a backlog. */
function useOfSlots(samples: { done: number; waiting: number }[], meanRunMs: number | null, slots: number): LimitedUse | null {
  let seconds = 0;
  let runs = 0;
  for (let i = 1; i < samples.length; i += 1) {
    const [a, b] = [samples[i - 1]!, samples[i]!];
    if (a.done < 0 || b.done < 0) continue;
    // More waiting than the slots at both ends of the second: a backlog all through it.
    if (a.waiting > slots && b.waiting > slots) {
      seconds += 1;
      runs += b.done - a.done;
    }
  }
  if (seconds === 0 || meanRunMs === null) return null;
  const runsPerSecond = runs / seconds;
  return {
    backlogSeconds: seconds,
    runsPerSecond,
    meanRunMs,
    slotUse: (runsPerSecond * meanRunMs) / 1000 / slots,
    callCapacityUse: runsPerSecond / (slots / (LIMITED.callMs / 1000)),
    mostWaiting: Math.max(...samples.map((s) => s.waiting)),
  };
}

export function formatReport(report: ChaosReport): string {
  const d = report.deliveries;
  return [
    `events: ${report.events} (+${report.forgedOnly} forged-only), acknowledged: ${report.acknowledged}`,
    `deliveries (valid): ${d.total} = ${d.ok2xx} x 2xx, ${d.client4xx} x 4xx, ${d.server5xx} x 5xx, ${d.network} network errors/timeouts`,
    `deliveries (forged): ${d.invalidSent}, rejected with 400/401: ${d.invalidRejected}`,
    `kills: ${report.kills.workers} workers (kill -9), ${report.kills.ingest} ingest (kill -9), ${report.kills.redisRestarts} Redis restart, ${report.kills.primaryFailovers} Redis Cluster primary killed (failover), ${report.kills.slotsMoved} shard slots moved, ${report.kills.postgresRestarts} Postgres restart`,
    `recoveries: ${Object.values(report.recoveries.reenqueued).reduce((a, b) => a + b, 0)} re-enqueues by the reconciler (${
      Object.entries(report.recoveries.reenqueued)
        .map(([why, n]) => `${n} ${why}`)
        .join(', ') || 'none'
    }), ${report.recoveries.workerStartFailures} worker start(s) failed and retried`,
    `effects applied: ${report.effects.charges} charges, ${report.effects.emails} emails, ${report.effects.shipments} shipments, ${report.effects.ledgerEntries} ledger entries, fan-out ${report.effects.fanoutIndex} + ${report.effects.fanoutNotify} (+ ${report.effects.fanoutPinged} final calls) (sandbox faults injected: ${report.effects.sandboxFaults}, answered from idempotency stores: ${report.effects.sandboxReplays})`,
    `destination: ${report.flow.destination} GitHub events applied by the receiver (examples/receivers/typescript, deduplicating on webhook-id)`,
    `flow control: ${report.flow.limited} runs of chaos.issue-limited (concurrency ${report.flow.limitedSlots}; the sandbox saw at most ${report.flow.limitedMaxInFlight} in flight), ${report.flow.paused} of chaos.issue-paused (${report.flow.waitingAtResume} waiting when it was resumed)`,
    report.flow.limitedUse
      ? `chaos.issue-limited with a backlog (${report.flow.limitedUse.backlogSeconds} s, up to ${report.flow.limitedUse.mostWaiting} waiting): ${report.flow.limitedUse.runsPerSecond.toFixed(1)} runs/s; its slots held a run ${(report.flow.limitedUse.slotUse * 100).toFixed(0)}% of the time (mean run ${report.flow.limitedUse.meanRunMs.toFixed(0)} ms from lease to end); ${(report.flow.limitedUse.callCapacityUse * 100).toFixed(0)}% of the ${(report.flow.limitedSlots / (LIMITED.callMs / 1000)).toFixed(0)} runs/s its 30 ms call alone allows`
      : 'chaos.issue-limited never had a backlog (its slots kept up)',
    ...(report.network
      ? [
          `network faults: ${Object.entries(report.network.episodes)
            .map(([kind, n]) => `${n} ${kind}`)
            .join(', ')}; after each stall ended, the next event finished in ${report.network.recoveryAfterStallMs.join(', ') || '-'} ms`,
        ]
      : []),
    `peak memory: ${Object.entries(report.peakMemoryMb)
      .map(([kind, mb]) => `${kind} ${mb.toFixed(0)} MB`)
      .join(', ')} (node processes and Redis: the largest VmHWM of their kind; Postgres: the PSS of all its processes)`,
    `time: sending ${(report.sendMs / 1000).toFixed(1)} s, drain after the last delivery ${(report.drainMs / 1000).toFixed(1)} s`,
    report.violations.length === 0 ? 'violations: none' : `VIOLATIONS (${report.violations.length}):\n  ${report.violations.slice(0, 50).join('\n  ')}`,
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) {
  const { values } = parseScriptArgs(import.meta.url, {
    options: {
      events: { type: 'string', default: '2000' },
      workers: { type: 'string', default: '3' },
      concurrency: { type: 'string', default: '50' },
      'queue-shards': { type: 'string', default: '1' },
      'queue-backend': { type: 'string', default: 'redis' },
      /** A Redis Cluster (3 primaries, 3 replicas) instead of one Redis: a primary killed, shard slots moved. */
      'redis-cluster': { type: 'boolean', default: false },
      /** How long the drain may go without an event finishing before it counts as stalled. */
      'drain-timeout-seconds': { type: 'string', default: '180' },
      /** Also write the report as JSON here (the smoke test reads it). */
      'report-file': { type: 'string' },
      /** Latency, stalls, narrow links and resets between the processes and Postgres/Redis. */
      'network-faults': { type: 'boolean', default: false },
      /** chaos.issue-limited's concurrency (2 unless a long run needs more to keep up). */
      'limited-slots': { type: 'string', default: '2' },
    },
  });
  const queueBackend = values['queue-backend'];
  if (queueBackend !== 'redis' && queueBackend !== 'postgres') {
    process.stderr.write(`--queue-backend must be redis or postgres (got "${queueBackend}")\n`);
    process.exit(2);
  }
  if (values['redis-cluster'] && queueBackend !== 'redis') {
    process.stderr.write('--redis-cluster needs --queue-backend redis\n');
    process.exit(2);
  }
  if (values['redis-cluster'] && values['network-faults']) {
    process.stderr.write('--network-faults cannot be used with --redis-cluster (its nodes announce their own addresses, past a proxy)\n');
    process.exit(2);
  }
  const limitedSlots = countArg('--limited-slots', values['limited-slots']);
  const events = countArg('--events', values['events']);
  const workers = countArg('--workers', values['workers']);
  const concurrency = countArg('--concurrency', values['concurrency']);
  const queueShards = countArg('--queue-shards', values['queue-shards']);
  const drainTimeoutSeconds = countArg('--drain-timeout-seconds', values['drain-timeout-seconds']);
  const report = await runChaos({
    limitedSlots,
    queueBackend,
    redisCluster: values['redis-cluster'],
    events,
    workers,
    concurrency,
    queueShards,
    drainTimeoutMs: drainTimeoutSeconds * 1000,
    networkFaults: values['network-faults'],
  });
  process.stdout.write(`${formatReport(report)}\n`);
  if (values['report-file']) await writeFile(values['report-file'], JSON.stringify(report, null, 2));
  process.exit(report.violations.length === 0 ? 0 : 1);
}
