/**
 * `npm run bench -- [--duration S] [--connections 10,50,100|none] [--rounds R] [--e2e-events N (0: none)] [--e2e-rounds R] [--workers 1,2,4] [--profile DIR] [--tables]
 *   [--baseline-root DIR] [--queue-backends redis|postgres|redis,postgres] [--queue-jobs N] [--peers graphile,bullmq,pgboss,inline|none]
 *   [--variants fanout,limited,external,external-final,destination,nolog|none] [--stats-wait S]`
 *
 * Side by side, in one process tree, on this machine's Postgres and Redis:
 *
 * 1. Ingest throughput and latency (autocannon) for signed ~1 KB Stripe events, 20% of them
 *    duplicates, at several concurrencies, against
 *      (a) naive: Hono + one INSERT ... ON CONFLICT DO NOTHING per request (no verification,
 *          no enqueue),
 *      (b) ceiling: Hono + signature verification + JSON parse (no database),
 *      (c) oncehook ingest (verification, group-committed claims, the enqueue relay),
 *      (d) the same with DELIVERY_LOG=off (what the delivery log costs).
 *    Printed as requests/s, p50 and p99, and oncehook's ratios to the others.
 *    Also CPU per request of the server and of its Postgres backends.
 * 2. The queue's own ceiling: BullMQ alone on the same Redis (bench/e2e.ts); with
 *    `--queue-backends ...postgres`, also on Oncehook's Postgres queue table (postgres-queue.ts).
 * 3. End to end (delivery to `done`) with each worker count: events/s, CPU per event per tier,
 *    statements, commits, rows, WAL and Redis commands per event, claim-to-start latency
 *    (bench/costs.ts, bench/e2e.ts); `--baseline-root DIR` runs another checkout beside this
 *    one, `--profile DIR` writes and summarises CPU profiles (bench/profile.ts),
 *    `--queue-backends redis,postgres` runs each worker count with the queue in Redis and in
 *    Postgres (QUEUE_BACKEND), side by side; `--peers` runs the pipelines a team would build
 *    instead (graphile-worker, BullMQ alone, pg-boss: bench/peers.ts), and the floor (inline:
 *    the top-up in the claim's transaction, no queue), through the same measurement with each
 *    worker count; `--variants` adds rows of this checkout with one more
 *    handler (fanout), that handler flow-limited (limited), a handler with one local and one
 *    external step (external; external-final: that step `final`), one destination, or the
 *    delivery log off (nolog), and what each adds per event (with `--baseline-root`, each variant runs on the baseline too). With the
 *    floor among the peers, each pipeline's CPU per event above the floor is printed too;
 *    `--e2e-rounds R` runs every pipeline R times, alternating, and combines its rounds
 *    (bench/rounds.ts), with the range of each per-round ratio beside the peers' ratios.
 *
 * All servers log at `warn`. Numbers are only comparable within one run (noisy machines):
 * read the ratios.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseScriptArgs, REDIS_URL, signStripe, spawnService, STRIPE_SECRET, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { createRedis, type QueueBackend } from '@oncehook/core';
import { cpuMs, rssMb } from './bench/costs.js';
import { summarizeProfiles } from './bench/profile.js';
import { createTestDatabaseOn, releaseAll } from './bench/databases.js';
import { createServer } from 'node:http';
import {
  fire,
  listeningUrl,
  measureEndToEnd,
  measurePeer,
  measureQueueCeiling,
  VARIANTS,
  variantEnv,
  type E2eRow,
  type PeerRow,
  type QueueCeiling,
  type Variant,
} from './bench/e2e.js';
import { PEERS, type Peer } from './bench/peers.js';
import { combineRounds, ratioSpread } from './bench/rounds.js';

export interface BenchOptions {
  durationSeconds: number;
  connections: number[];
  /** Rounds per concurrency, alternating the servers (default 1). */
  rounds?: number;
  e2eEvents: number;
  /**
   * End-to-end rounds per worker count (default 1): every pipeline (this checkout, the baseline,
   * variants, peers) runs once per round, in the same order each round, and its row combines
   * its rounds (scripts/bench/rounds.ts); the peers table shows the per-round ratios' spread.
   */
  e2eRounds?: number;
  workers: number[];
  /** Another checkout of Oncehook (a worktree of an older commit, with node_modules) whose end-to-end run is measured beside this one's. */
  baselineRoot?: string;
  /** CPU profiles of the end-to-end processes (first worker count) go here; their top frames are printed. */
  profileDir?: string;
  /** Print each end-to-end run's rows written per event by table (`--tables`). */
  tables?: boolean;
  /** Jobs for the BullMQ no-op ceiling (default 20,000). */
  queueJobs?: number;
  /**
   * Queue stores measured end to end (default redis). With postgres too, each worker count also
   * runs with QUEUE_BACKEND=postgres (`postgres queue` rows; with a baseline, `baseline postgres
   * queue` too), and the no-op ceiling is measured on the Postgres queue table as well.
   */
  queueBackends?: QueueBackend[];
  /**
   * Peer pipelines run end to end beside Oncehook with each worker count (scripts/bench/peers.ts):
   * graphile-worker, BullMQ alone, pg-boss.
   */
  peers?: Peer[];
  /**
   * Rows of this checkout with one change, with each worker count: `fanout` (one more
   * handler on the event), `limited` (that handler with a flow limit it never reaches),
   * `destination` (each event forwarded to a receiver in the bench process), `nolog` (the
   * ingest with DELIVERY_LOG=off: the delivery log taken away).
   */
  variants?: Variant[];
  /** Wait for Postgres's transaction and row counters after each end-to-end run (default 11 s; the smoke test passes 0). */
  statsWaitMs?: number;
  log?: (line: string) => void;
}

export interface IngestRow {
  server: 'naive' | 'ceiling' | 'oncehook' | 'oncehook-nolog';
  connections: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  rssMb: number;
  /** CPU of the server process per request served, in microseconds. */
  cpuUsPerRequest: number;
  /** CPU of the Postgres backends serving its database per request, in microseconds. */
  dbCpuUsPerRequest: number;
  /** Requests answered. */
  served: number;
}

/** One row from a server's rounds: mean throughput, median latencies, CPU per request over all of them. */
function combine(rows: IngestRow[]): IngestRow {
  const first = rows[0]!;
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const served = rows.reduce((n, r) => n + r.served, 0);
  const weighted = (pick: (r: IngestRow) => number) => Math.round(rows.reduce((n, r) => n + pick(r) * r.served, 0) / Math.max(1, served));
  return {
    ...first,
    requestsPerSecond: Math.round(rows.reduce((n, r) => n + r.requestsPerSecond, 0) / rows.length),
    p50: median(rows.map((r) => r.p50)),
    p99: median(rows.map((r) => r.p99)),
    non2xx: rows.reduce((n, r) => n + r.non2xx, 0),
    errors: rows.reduce((n, r) => n + r.errors, 0),
    cpuUsPerRequest: weighted((r) => r.cpuUsPerRequest),
    dbCpuUsPerRequest: weighted((r) => r.dbCpuUsPerRequest),
    served,
  };
}

const PAD = 'x'.repeat(760); // brings each event to ~1 KB

/** Signed requests, 20% of them duplicates of an earlier event (as provider retries are). */
function makeRequests(count: number, run: string): { body: string; headers: Record<string, string> }[] {
  const requests: { body: string; headers: Record<string, string> }[] = [];
  let unique = 0;
  for (let i = 0; i < count; i += 1) {
    const duplicate = unique > 0 && Math.random() < 0.2;
    const n = duplicate ? Math.floor(Math.random() * unique) : unique++;
    const event = {
      id: `evt_${run}_${n}`,
      object: 'event',
      type: 'payment_intent.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: `pi_${n}`, amount: 1000, amount_received: 1000, currency: 'usd', customer: `cus_${n % 100}`, description: PAD } },
    };
    requests.push(signStripe(event));
  }
  return requests;
}

/** The CPU so far of the Postgres backends connected to a database (their pids from pg_stat_activity). */
async function backendsCpuMs(pool: Pool, database: string): Promise<number> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database]);
  return rows.reduce((sum, row) => sum + cpuMs(row.pid), 0);
}

export interface BenchResult {
  ingest: IngestRow[];
  /** End-to-end rows of Oncehook's checkouts and variants, each its rounds combined. */
  e2e: E2eRow[];
  /** Peer rows, each its rounds combined. */
  peers: PeerRow[];
  /** With several rounds: each round's CPU per event and events/s, per pipeline (`this checkout` ... or a peer's name) and worker count. */
  rounds: { label: string; workers: number; cpuMsPerEvent: number[]; eventsPerSecond: number[] }[];
  queueCeiling: QueueCeiling;
  /** The no-op ceiling of Oncehook's Postgres queue table (when postgres is among queueBackends). */
  postgresQueueCeiling?: QueueCeiling;
}

export async function runBench(options: BenchOptions): Promise<BenchResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const run = Math.random().toString(36).slice(2, 8);
  const services: Service[] = [];
  const databases: string[] = [];
  const pools: Pool[] = [];
  try {
    // ---- 1. ingest side by side --------------------------------------------------------
    const naiveDb = await createTestDatabaseOn(`oncehook_bench_naive_${run}`);
    const onceDb = await createTestDatabaseOn(`oncehook_bench_ingest_${run}`);
    const nologDb = await createTestDatabaseOn(`oncehook_bench_nolog_${run}`);
    databases.push(naiveDb.name, onceDb.name, nologDb.name);
    const env = { LOG_LEVEL: 'warn', STRIPE_WEBHOOK_SECRET: STRIPE_SECRET, PORT: '0', HOST: '127.0.0.1', DATABASE_POOL_SIZE: '10' };
    const naive = spawnService('naive-baseline', { ...env, DATABASE_URL: naiveDb.url });
    const ceiling = spawnService('verify-only', env);
    const oncehook = spawnService('ingest', { ...env, DATABASE_URL: onceDb.url, QUEUE_PREFIX: `bench-${run}` });
    // The same ingest without the delivery log (DELIVERY_LOG=off): what the log costs.
    const nolog = spawnService('ingest', { ...env, DATABASE_URL: nologDb.url, QUEUE_PREFIX: `bench-nolog-${run}`, DELIVERY_LOG: 'off' });
    services.push(naive, ceiling, oncehook, nolog);
    const urls = { naive: await listeningUrl(naive), ceiling: await listeningUrl(ceiling), oncehook: await listeningUrl(oncehook), 'oncehook-nolog': await listeningUrl(nolog) };
    const procs = { naive, ceiling, oncehook, 'oncehook-nolog': nolog };
    const naivePool = createPool(naiveDb.url, { max: 1 });
    const oncePool = createPool(onceDb.url, { max: 1 });
    const nologPool = createPool(nologDb.url, { max: 1 });
    pools.push(naivePool, oncePool, nologPool);

    const ingest: IngestRow[] = [];
    const rounds = options.rounds ?? 1;
    for (const connections of options.connections) {
      const perRound: IngestRow[] = [];
      // Rounds alternate the servers (naive, ceiling, oncehook, no log, naive, ...), so the
      // machine's noise spreads over all of them; the row of a server sums its rounds.
      for (let round = 0; round < rounds; round += 1)
        for (const server of ['naive', 'ceiling', 'oncehook', 'oncehook-nolog'] as const) {
          await naivePool.query('TRUNCATE oncehook.events CASCADE');
          await oncePool.query('TRUNCATE oncehook.events CASCADE');
          await nologPool.query('TRUNCATE oncehook.events CASCADE');
          // Fresh signatures each round (Stripe's 300 s tolerance), 20% duplicates.
          const requests = makeRequests(Math.max(20_000, connections * 400), `${run}_${server}_${connections}_${round}`);
          // CPU of the server process and of the Postgres backends serving its database, per request.
          const dbName = { naive: naiveDb.name, ceiling: null, oncehook: onceDb.name, 'oncehook-nolog': nologDb.name }[server];
          const before = { server: cpuMs(procs[server].pid), db: dbName ? await backendsCpuMs(naivePool, dbName) : 0 };
          const result = await fire(urls[server], requests, { connections, durationSeconds: options.durationSeconds }).done;
          const after = { server: cpuMs(procs[server].pid), db: dbName ? await backendsCpuMs(naivePool, dbName) : 0 };
          const served = Math.max(1, result.requests.total);
          const row: IngestRow = {
            server,
            connections,
            requestsPerSecond: Math.round(result.requests.average),
            p50: result.latency.p50,
            p99: result.latency.p99,
            non2xx: result.non2xx,
            errors: result.errors + result.timeouts,
            rssMb: rssMb(procs[server].pid),
            cpuUsPerRequest: Math.round(((after.server - before.server) * 1000) / served),
            dbCpuUsPerRequest: Math.round(((after.db - before.db) * 1000) / served),
            served,
          };
          perRound.push(row);
          log(
            `  ${server.padEnd(14)} c=${String(connections).padEnd(4)} ${String(row.requestsPerSecond).padStart(6)} req/s  p50 ${row.p50} ms  p99 ${row.p99} ms  non-2xx ${row.non2xx}  errors ${row.errors}  rss ${row.rssMb} MB  cpu ${row.cpuUsPerRequest} us/req + db ${row.dbCpuUsPerRequest} us/req`,
          );
        }
      for (const server of ['naive', 'ceiling', 'oncehook', 'oncehook-nolog'] as const) ingest.push(combine(perRound.filter((r) => r.server === server)));
    }

    // ---- 2. the queue's own ceiling ------------------------------------------------------
    const queueCeiling = await measureQueueCeiling(`bench-ceiling-${run}`, options.queueJobs ?? 20_000);
    log(`  bullmq no-op: added ${queueCeiling.addedPerSecond} jobs/s (addBulk), processed ${queueCeiling.processedPerSecond} jobs/s (concurrency 32)`);
    const backends = options.queueBackends ?? ['redis'];
    let postgresQueueCeiling: QueueCeiling | undefined;
    if (backends.includes('postgres')) {
      const ceilingDb = await createTestDatabaseOn(`oncehook_bench_pgq_ceiling_${run}`);
      databases.push(ceilingDb.name);
      postgresQueueCeiling = await measureQueueCeiling(`bench-ceiling-${run}`, options.queueJobs ?? 20_000, ceilingDb.url);
      log(
        `  postgres queue table no-op: added ${postgresQueueCeiling.addedPerSecond} jobs/s (addBulk), processed ${postgresQueueCeiling.processedPerSecond} jobs/s (concurrency 32)`,
      );
    }

    // ---- 3. end to end ---------------------------------------------------------------------
    const e2e: E2eRow[] = [];
    const peers: PeerRow[] = [];
    const perRound: BenchResult['rounds'] = [];
    const redis = createRedis(REDIS_URL, 'producer');
    // The destination variant's receiver: answers every forwarded event 204 (what a service
    // that accepts it does); the bench measures the sender's side.
    const receiver = createServer((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(204).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/webhooks`;
    try {
      const rounds = options.e2eRounds ?? 1;
      for (const workerCount of options.workers) {
        // With a baseline checkout, its run and this one's alternate (baseline first), so the
        // machine's noise falls on both.
        const sides: { label: string; root?: string; queueBackend?: QueueBackend; workerEnv?: Record<string, string>; ingestEnv?: Record<string, string> }[] = [];
        if (backends.includes('redis')) {
          if (options.baselineRoot) sides.push({ label: 'baseline', root: options.baselineRoot });
          sides.push({ label: 'this checkout' });
        }
        if (backends.includes('postgres')) {
          if (options.baselineRoot) sides.push({ label: 'baseline postgres queue', root: options.baselineRoot, queueBackend: 'postgres' });
          sides.push({ label: 'postgres queue', queueBackend: 'postgres' });
        }
        for (const variant of options.variants ?? []) {
          const { workerEnv, ingestEnv } = variantEnv(variant, receiverUrl);
          // With a baseline, each variant runs on it too (before and after in one run).
          if (options.baselineRoot) sides.push({ label: `baseline + ${variant}`, root: options.baselineRoot, workerEnv, ingestEnv });
          sides.push({ label: `+ ${variant}`, workerEnv, ingestEnv });
        }
        // Every pipeline once per round, in the same order each round: the machine's noise
        // spreads over all of them, and each row combines its rounds.
        const sideRounds = new Map<string, E2eRow[]>(sides.map((side) => [side.label, []]));
        const peerRounds = new Map<Peer, PeerRow[]>((options.peers ?? []).map((peer) => [peer, []]));
        for (let r = 0; r < rounds; r += 1) {
          // Databases, queue prefixes and event ids carry the run tag: one per round.
          const roundRun = r === 0 ? run : `${run}r${r}`;
          const suffix = rounds > 1 ? ` (round ${r + 1} of ${rounds})` : '';
          // What every run of this round is given, Oncehook's and the peers'.
          const shared = { run: roundRun, workers: workerCount, events: options.e2eEvents, env, redis, services, databases, pools, statsWaitMs: options.statsWaitMs };
          for (const side of sides) {
            // Profiles of the first run of each side, in <dir>/this, <dir>/baseline, <dir>/fanout ...
            const profileDir =
              options.profileDir && r === 0 && !e2e.some((row) => row.label === side.label)
                ? path.join(options.profileDir, side.root ? 'baseline' : side.label === 'this checkout' ? 'this' : side.label.replace(/[^a-z0-9]+/gi, ''))
                : undefined;
            const row = await measureEndToEnd({ ...shared, profileDir, tables: options.tables, ...side });
            if (row.rowsByTable) {
              log(`  rows per event by table, ${side.label} (inserted, updated (HOT), deleted):`);
              for (const [table, n] of Object.entries(row.rowsByTable)) log(`    ${table.padEnd(36)} ${n.inserted} ins, ${n.updated} upd (${n.hot} HOT), ${n.deleted} del`);
            }
            if (profileDir) {
              log(`  profiles of ${side.label}:`);
              for (const line of summarizeProfiles(profileDir, row.pids)) log(line);
            }
            sideRounds.get(side.label)!.push(row);
            log(
              `  e2e ${row.label} workers=${workerCount}${suffix}: ${row.events} events (${row.deliveries} deliveries) done in ${row.seconds} s = ${row.eventsPerSecond} events/s; claim->start p50 ${row.claimToStartP50Ms} ms; cpu/event ${row.cpuMsPerEvent.total} ms; worker rss ${row.workerRssMb.join(', ')} MB`,
            );
          }
          for (const peer of options.peers ?? []) {
            const row = await measurePeer({ ...shared, peer });
            peerRounds.get(peer)!.push(row);
            log(
              `  e2e peer ${peer} workers=${workerCount}${suffix}: ${row.events} events (${row.deliveries} deliveries) done in ${row.seconds} s = ${row.eventsPerSecond} events/s; cpu/event ${row.cpuMsPerEvent.total} ms; worker rss ${row.workerRssMb.length > 0 ? `${row.workerRssMb.join(', ')} MB` : '- (no worker)'}`,
            );
          }
        }
        for (const [label, rows] of [...sideRounds, ...peerRounds] as [string, (E2eRow | PeerRow)[]][]) {
          if (rounds > 1)
            perRound.push({ label, workers: workerCount, cpuMsPerEvent: rows.map((row) => row.cpuMsPerEvent.total), eventsPerSecond: rows.map((row) => row.eventsPerSecond) });
        }
        for (const rows of sideRounds.values()) e2e.push(combineRounds(rows));
        for (const rows of peerRounds.values()) peers.push(combineRounds(rows));
      }
    } finally {
      redis.disconnect();
      receiver.close();
    }
    return { ingest, e2e, peers, rounds: perRound, queueCeiling, postgresQueueCeiling };
  } finally {
    await releaseAll({ services, pools, databases });
  }
}

export function formatBench(result: BenchResult): string {
  const lines = [
    '',
    'Ingest (signed ~1 KB Stripe events, 20% duplicates)',
    'conns | naive req/s p99 | ceiling req/s p99 | oncehook req/s p99 | oncehook/naive thr, p99 | oncehook/ceiling thr | no log req/s | log/no log thr',
  ];
  const connections = [...new Set(result.ingest.map((r) => r.connections))];
  for (const c of connections) {
    const get = (s: IngestRow['server']) => result.ingest.find((r) => r.connections === c && r.server === s)!;
    const [n, v, o, u] = [get('naive'), get('ceiling'), get('oncehook'), get('oncehook-nolog')];
    lines.push(
      `${String(c).padStart(5)} | ${String(n.requestsPerSecond).padStart(6)} ${String(n.p99).padStart(4)} ms | ${String(v.requestsPerSecond).padStart(7)} ${String(v.p99).padStart(4)} ms | ${String(o.requestsPerSecond).padStart(7)} ${String(o.p99).padStart(4)} ms | ${(o.requestsPerSecond / n.requestsPerSecond).toFixed(2)}x, ${(o.p99 / Math.max(1, n.p99)).toFixed(2)}x | ${(o.requestsPerSecond / v.requestsPerSecond).toFixed(2)}x | ${String(u.requestsPerSecond).padStart(6)} | ${(o.requestsPerSecond / u.requestsPerSecond).toFixed(2)}x`,
    );
  }
  lines.push('', 'CPU per request, microseconds (server process + its Postgres backends)', 'conns | naive | oncehook | oncehook without the delivery log | log/no log');
  for (const c of connections) {
    const get = (s: IngestRow['server']) => result.ingest.find((r) => r.connections === c && r.server === s)!;
    const total = (r: IngestRow) => r.cpuUsPerRequest + r.dbCpuUsPerRequest;
    const [n, o, u] = [get('naive'), get('oncehook'), get('oncehook-nolog')];
    lines.push(
      `${String(c).padStart(5)} | ${n.cpuUsPerRequest} + ${n.dbCpuUsPerRequest} | ${o.cpuUsPerRequest} + ${o.dbCpuUsPerRequest} | ${u.cpuUsPerRequest} + ${u.dbCpuUsPerRequest} | ${(total(o) / Math.max(1, total(u))).toFixed(2)}x`,
    );
  }
  lines.push(
    '',
    `Queue ceiling (BullMQ alone on the same Redis, ${result.queueCeiling.jobs} no-op jobs): added ${result.queueCeiling.addedPerSecond} jobs/s, processed ${result.queueCeiling.processedPerSecond} jobs/s`,
    ...(result.postgresQueueCeiling
      ? [
          `Queue ceiling on Postgres (Oncehook's queue table, postgres-queue.ts, same no-op test): added ${result.postgresQueueCeiling.addedPerSecond} jobs/s, processed ${result.postgresQueueCeiling.processedPerSecond} jobs/s`,
        ]
      : []),
    '',
    'End to end (delivery -> done, wallet top-ups with one local step, mean 3 deliveries per event, autocannon 50 connections, pre-signed)',
    'checkout      | workers | events/s | vs 1 worker | vs queue ceiling | claim->start p50 p99 ms under load | idle workers',
  );
  const side = (row: E2eRow) => row.label.padEnd(14);
  for (const row of result.e2e) {
    const base = result.e2e.find((r) => r.label === row.label)?.eventsPerSecond ?? 1;
    // Each row against its own queue store's ceiling.
    const ceiling = (row.queueBackend === 'postgres' ? result.postgresQueueCeiling : result.queueCeiling) ?? result.queueCeiling;
    lines.push(
      `${side(row)} | ${String(row.workers).padStart(7)} | ${String(row.eventsPerSecond).padStart(8)} | ${(row.eventsPerSecond / base).toFixed(2).padStart(10)}x | ${((100 * row.eventsPerSecond) / ceiling.processedPerSecond).toFixed(1).padStart(15)}% | ${row.claimToStartP50Ms} ${row.claimToStartP99Ms} | ${row.idleClaimToStartP50Ms} ${row.idleClaimToStartP99Ms}`,
    );
  }
  lines.push('', 'CPU per event, ms (load generator excluded)', 'checkout      | workers | ingest | workers | postgres | redis | total');
  for (const row of result.e2e) {
    const c = row.cpuMsPerEvent;
    lines.push(
      `${side(row)} | ${String(row.workers).padStart(7)} | ${String(c.ingest).padStart(6)} | ${String(c.workers).padStart(7)} | ${String(c.postgres).padStart(8)} | ${String(c.redis).padStart(5)} | ${c.total}`,
    );
  }
  lines.push(
    '',
    'Work per event (statements: counted by the processes; a baseline without the counter shows 0)',
    'checkout      | workers | pg transactions | pg statements (ingest + workers) | pg round trips (ingest + workers) | rows written | WAL bytes | redis commands',
  );
  for (const row of result.e2e) {
    const p = row.perEvent;
    lines.push(
      `${side(row)} | ${String(row.workers).padStart(7)} | ${String(p.transactions).padStart(15)} | ${p.statements} (${p.ingestStatements} + ${p.workerStatements}) | ${(p.ingestRoundTrips + p.workerRoundTrips).toFixed(2)} (${p.ingestRoundTrips} + ${p.workerRoundTrips}) | ${String(p.rowsWritten).padStart(12)} | ${String(p.walBytes).padStart(9)} | ${p.redisCommands}`,
    );
  }
  // Each baseline row against this checkout's row of the same pipeline: `baseline` against
  // `this checkout`, `baseline postgres queue` against `postgres queue`, `baseline + v` against `+ v`.
  const pairs = result.e2e.filter((r) => r.label.startsWith('baseline'));
  if (pairs.length > 0) {
    lines.push(
      '',
      'This checkout against the baseline, same run',
      'pipeline                | workers | events/s | CPU per event | pg transactions per event | rows written per event | WAL bytes per event | redis commands per event',
    );
    for (const before of pairs) {
      const label = before.label === 'baseline' ? 'this checkout' : before.label.replace(/^baseline /, '');
      const after = result.e2e.find((r) => r.label === label && r.workers === before.workers);
      if (!after) continue;
      lines.push(
        `${label.padEnd(23)} | ${String(before.workers).padStart(7)} | ${(after.eventsPerSecond / before.eventsPerSecond).toFixed(2)}x | ${(after.cpuMsPerEvent.total / before.cpuMsPerEvent.total).toFixed(2)}x (${before.cpuMsPerEvent.total} -> ${after.cpuMsPerEvent.total} ms) | ${before.perEvent.transactions} -> ${after.perEvent.transactions} | ${before.perEvent.rowsWritten} -> ${after.perEvent.rowsWritten} | ${before.perEvent.walBytes} -> ${after.perEvent.walBytes} | ${before.perEvent.redisCommands} -> ${after.perEvent.redisCommands}`,
      );
    }
  }
  const variants = result.e2e.filter((r) => r.label.startsWith('+ '));
  if (variants.length > 0) {
    lines.push(
      '',
      'What one change costs per event (this checkout with it minus without it, same worker count, same run; nolog: the delivery log taken away)',
      'addition       | workers | CPU ms/event | pg statements | pg round trips (workers) | pg transactions | rows written | WAL bytes | redis commands',
    );
    for (const row of variants) {
      const plain = result.e2e.find((r) => r.label === 'this checkout' && r.workers === row.workers);
      if (!plain) continue;
      const delta = (a: number, b: number) => `${a - b >= 0 ? '+' : ''}${(a - b).toFixed(2)}`;
      lines.push(
        `${row.label.padEnd(14)} | ${String(row.workers).padStart(7)} | ${delta(row.cpuMsPerEvent.total, plain.cpuMsPerEvent.total).padStart(12)} | ${delta(row.perEvent.statements, plain.perEvent.statements).padStart(13)} | ${delta(row.perEvent.workerRoundTrips, plain.perEvent.workerRoundTrips).padStart(24)} | ${delta(row.perEvent.transactions, plain.perEvent.transactions).padStart(15)} | ${delta(row.perEvent.rowsWritten, plain.perEvent.rowsWritten).padStart(12)} | ${delta(row.perEvent.walBytes, plain.perEvent.walBytes).padStart(9)} | ${delta(row.perEvent.redisCommands, plain.perEvent.redisCommands)}`,
      );
    }
  }
  if (result.peers.length > 0) {
    lines.push(
      '',
      'Peers: the same top-ups through the pipeline a team would build instead (scripts/bench/peers.ts), same run',
      'pipeline        | workers | events/s | CPU ms/event: ingest | workers | postgres | redis | total | pg transactions | rows written | WAL bytes | redis commands | Oncehook CPU, events/s vs it',
    );
    const name: Record<Peer, string> = { graphile: 'graphile-worker', bullmq: 'BullMQ alone', pgboss: 'pg-boss', inline: 'inline (floor)' };
    const roundsOf = (label: string, workers: number) => result.rounds.find((r) => r.label === label && r.workers === workers);
    for (const workers of [...new Set(result.peers.map((r) => r.workers))]) {
      // Oncehook on each queue store this run measured (Redis: `this checkout`; `postgres queue`).
      const oursLabels = [
        { label: 'this checkout', name: 'Oncehook' },
        { label: 'postgres queue', name: 'Oncehook (pg q)' },
      ].filter(({ label }) => result.e2e.some((r) => r.label === label && r.workers === workers));
      const rows: { label: string; eventsPerSecond: number; c: E2eRow['cpuMsPerEvent']; p: PeerRow['perEvent']; vs: string }[] = [];
      for (const { label, name: shown } of oursLabels) {
        const ours = result.e2e.find((r) => r.label === label && r.workers === workers)!;
        rows.push({ label: shown, eventsPerSecond: ours.eventsPerSecond, c: ours.cpuMsPerEvent, p: ours.perEvent, vs: '' });
      }
      for (const peer of result.peers.filter((r) => r.workers === workers)) {
        // With several rounds, each ratio's range over the rounds follows it in brackets; with
        // both stores measured, one ratio per store.
        const peerRounds = roundsOf(peer.peer, workers);
        const vs = oursLabels
          .map(({ label, name: shown }) => {
            const ours = result.e2e.find((r) => r.label === label && r.workers === workers)!;
            const oursRounds = roundsOf(label, workers);
            const spread = (pick: (r: BenchResult['rounds'][number]) => number[]) => {
              const range = oursRounds && peerRounds ? ratioSpread(pick(oursRounds), pick(peerRounds)) : '';
              return range ? ` (${range})` : '';
            };
            const ratios = `${(ours.cpuMsPerEvent.total / peer.cpuMsPerEvent.total).toFixed(2)}x${spread((r) => r.cpuMsPerEvent)}, ${(ours.eventsPerSecond / peer.eventsPerSecond).toFixed(2)}x${spread((r) => r.eventsPerSecond)}`;
            return oursLabels.length > 1 ? `${shown}: ${ratios}` : ratios;
          })
          .join('; ');
        rows.push({ label: name[peer.peer], eventsPerSecond: peer.eventsPerSecond, c: peer.cpuMsPerEvent, p: peer.perEvent, vs });
      }
      for (const { label, eventsPerSecond, c, p, vs } of rows)
        lines.push(
          `${label.padEnd(15)} | ${String(workers).padStart(7)} | ${String(eventsPerSecond).padStart(8)} | ${String(c.ingest).padStart(20)} | ${String(c.workers).padStart(7)} | ${String(c.postgres).padStart(8)} | ${String(c.redis).padStart(5)} | ${String(c.total).padStart(5)} | ${String(p.transactions).padStart(15)} | ${String(p.rowsWritten).padStart(12)} | ${String(p.walBytes).padStart(9)} | ${String(p.redisCommands).padStart(14)} | ${vs}`,
        );
    }
    // What each pipeline spends between the claim and the work: its CPU per event minus the
    // floor's (inline: the same verification, claim and ledger writes with no queue).
    const floors = result.peers.filter((r) => r.peer === 'inline');
    if (floors.length > 0) {
      lines.push(
        '',
        `Above the floor: CPU ms per event minus the inline row's (what a pipeline adds between the claim and the work), same run`,
        "pipeline        | workers | above the floor | Oncehook's above the floor vs it",
      );
      for (const floor of floors) {
        const above = (total: number) => total - floor.cpuMsPerEvent.total;
        const ours = result.e2e.find((r) => r.label === 'this checkout' && r.workers === floor.workers);
        const rows = [
          ...(ours ? [{ label: 'Oncehook', total: ours.cpuMsPerEvent.total }] : []),
          ...result.peers.filter((r) => r.workers === floor.workers && r.peer !== 'inline').map((r) => ({ label: name[r.peer], total: r.cpuMsPerEvent.total })),
        ];
        for (const row of rows) {
          const vs = ours && row.label !== 'Oncehook' && above(row.total) > 0 ? `${(above(ours.cpuMsPerEvent.total) / above(row.total)).toFixed(2)}x` : '';
          lines.push(`${row.label.padEnd(15)} | ${String(floor.workers).padStart(7)} | ${above(row.total).toFixed(2).padStart(15)} | ${vs}`);
        }
      }
    }
  }
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) {
  const { values } = parseScriptArgs(import.meta.url, {
    options: {
      duration: { type: 'string', default: '8' },
      connections: { type: 'string', default: '10,50,100' },
      'e2e-events': { type: 'string', default: '2000' },
      workers: { type: 'string', default: '1,2,4' },
      rounds: { type: 'string', default: '1' },
      /** End-to-end rounds per worker count: every pipeline once per round, alternating; each row combines its rounds. */
      'e2e-rounds': { type: 'string', default: '1' },
      /** CPU profiles of the first end-to-end run's processes (node --cpu-prof) into this directory. */
      profile: { type: 'string' },
      /** Rows written per event by table, after each end-to-end run (pg_stat_user_tables of its database). */
      tables: { type: 'boolean', default: false },
      /** Another checkout measured end to end beside this one (before/after in one run). */
      'baseline-root': { type: 'string' },
      /** Queue stores to run end to end: redis, postgres or both (redis,postgres). */
      'queue-backends': { type: 'string', default: 'redis' },
      /** Jobs of the BullMQ no-op ceiling (each store). */
      'queue-jobs': { type: 'string', default: '20000' },
      /** Peer pipelines beside Oncehook end to end: graphile, bullmq, pgboss, inline (the floor: no queue) (comma-separated) or none. */
      peers: { type: 'string', default: PEERS.join(',') },
      /** Rows of this checkout with one change: fanout, limited, destination, nolog (the delivery log off) (comma-separated) or none. */
      variants: { type: 'string', default: 'none' },
      /** Seconds to wait for Postgres's transaction and row counters after each end-to-end run (idle backends report within 10 s). */
      'stats-wait': { type: 'string', default: '11' },
      /** Also write the result as JSON here (the smoke test reads it). */
      'report-file': { type: 'string' },
    },
  });
  const queueBackends = values['queue-backends'].split(',').map((b) => b.trim());
  const unknownBackend = queueBackends.find((b) => b !== 'redis' && b !== 'postgres');
  if (unknownBackend !== undefined || queueBackends.length === 0) {
    process.stderr.write(`--queue-backends takes redis, postgres or redis,postgres (got "${values['queue-backends']}")\n`);
    process.exit(2);
  }
  const e2eRounds = Number(values['e2e-rounds']);
  if (!Number.isInteger(e2eRounds) || e2eRounds < 1) {
    process.stderr.write(`--e2e-rounds takes a whole number of rounds, 1 or more (got "${values['e2e-rounds']}")\n`);
    process.exit(2);
  }
  const peers = values.peers === 'none' ? [] : values.peers.split(',').map((p) => p.trim());
  const unknownPeer = peers.find((p) => !(PEERS as readonly string[]).includes(p));
  if (unknownPeer !== undefined) {
    process.stderr.write(`--peers takes ${PEERS.join(', ')} (comma-separated) or none (got "${unknownPeer}")\n`);
    process.exit(2);
  }
  const e2eEvents = Number(values['e2e-events']);
  if (!Number.isInteger(e2eEvents) || e2eEvents < 0) {
    process.stderr.write(`--e2e-events takes a whole number of events, or 0 to run no end-to-end pipeline (got "${values['e2e-events']}")\n`);
    process.exit(2);
  }
  const variants = values.variants === 'none' ? [] : values.variants.split(',').map((v) => v.trim());
  const unknownVariant = variants.find((v) => !Object.hasOwn(VARIANTS, v));
  if (unknownVariant !== undefined) {
    process.stderr.write(`--variants takes ${Object.keys(VARIANTS).join(', ')} (comma-separated) or none (got "${unknownVariant}")\n`);
    process.exit(2);
  }
  const result = await runBench({
    durationSeconds: Number(values.duration),
    connections: values.connections === 'none' ? [] : values.connections.split(',').map(Number),
    e2eEvents,
    // --e2e-events 0: ingest alone (no end-to-end run at any worker count).
    workers: e2eEvents === 0 ? [] : values.workers.split(',').map(Number),
    rounds: Number(values.rounds),
    e2eRounds,
    profileDir: values.profile ? path.resolve(values.profile) : undefined,
    tables: values.tables,
    baselineRoot: values['baseline-root'] ? path.resolve(values['baseline-root']) : undefined,
    queueBackends: queueBackends as QueueBackend[],
    queueJobs: Number(values['queue-jobs']),
    peers: peers as Peer[],
    variants: variants as Variant[],
    statsWaitMs: Number(values['stats-wait']) * 1000,
  });
  process.stdout.write(`${formatBench(result)}\n`);
  if (values['report-file']) await writeFile(values['report-file'], JSON.stringify(result, null, 2));
  process.exit(0);
}
