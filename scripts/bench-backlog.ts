/**
 * `npm run bench:backlog -- [--sizes 1000,10000,30000] [--variant topup|fanout|limited|external|external-final|flow]
 *   [--baseline-root DIR] [--rounds N] [--stats-wait S]`: what a backlog costs in memory, whether a worker's
 * memory grows with the backlog it drains, and the worker's CPU and round trips per event
 * while it drains alone (the steadiest unit the benches have: two drains agree within ~5%).
 *
 * For each size N, on a database and queue prefix of its own: an ingest alone (no worker)
 * takes N wallet top-ups (one delivery each) and the enqueue relay queues them; the Redis
 * server's `used_memory` before and after gives the bytes a queued event costs. Then one worker
 * (WORKER_CONCURRENCY 16) starts and drains the backlog; its resident memory is sampled every
 * 250 ms: when ready, at its peak, at the end. A worker that held the backlog (or a share of
 * it) in memory would peak higher with each size; one that does not peaks the same. The
 * worker's user + system CPU from ready to drained, per event, is the worker tier alone (no
 * ingest, no load generator beside it): steadier than the end-to-end bench's worker column.
 * Beside it, the same span's CPU of the database's Postgres backends (the worker's, and the
 * idle ingest's) and of the Redis server, per event: the other two tiers a drain costs, and
 * the worker's round trips and statements per event (its oncehook_db_* counters), and the
 * database's transactions per event.
 *
 * `--variant`: the workers' handlers as the end-to-end bench's variant of that name (external:
 * one more handler with a local and an external step; flow: one more handler limited to 2
 * runs at once, each holding its slot 30 ms in a step: the drain also prints the share of its
 * slots' capacity it got, from its first lease to its last done). `--baseline-root`: another checkout
 * (a git worktree with node_modules) drains the same backlog, alternating with this one,
 * `--rounds` times each: before and after in one run, in the drain's units.
 */
import path from 'node:path';
import { Redis } from 'ioredis';
import { parseScriptArgs, REDIS_URL, spawnService, STRIPE_SECRET, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { EVENT_QUEUE_NAME, queueKey } from '@oncehook/core';
import { cpuMs, rssMb, settledDifference, snapshot, type Subjects } from './bench/costs.js';
import { createTestDatabaseOn, releaseAll } from './bench/databases.js';
import { fireAll, listeningUrl, SHOP_ENV, topUp, VARIANTS } from './bench/e2e.js';
import { ratioSpread } from './bench/rounds.js';
import { FLOW_CALL_MS, FLOW_SLOTS } from './bench/variant-handlers.js';

const { values } = parseScriptArgs(import.meta.url, {
  options: {
    sizes: { type: 'string', default: '1000,10000,30000' },
    variant: { type: 'string', default: 'topup' },
    'baseline-root': { type: 'string' },
    rounds: { type: 'string', default: '1' },
    /** Seconds to wait for Postgres's transaction counters after each drain (idle backends report within 10 s). */
    'stats-wait': { type: 'string', default: '11' },
  },
});
const sizes = values.sizes.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 100)) {
  process.stderr.write(`--sizes takes comma-separated integers >= 100 (got "${values.sizes}")\n`);
  process.exit(2);
}
/** The variants a drain can run: those that need nothing but the worker's environment. */
const DRAIN_VARIANTS = ['fanout', 'limited', 'external', 'external-final', 'flow'] as const;
const variant = values.variant;
if (variant !== 'topup' && !(DRAIN_VARIANTS as readonly string[]).includes(variant)) {
  process.stderr.write(`--variant takes topup, ${DRAIN_VARIANTS.join(', ')} (got "${variant}")\n`);
  process.exit(2);
}
const variantWorkerEnv: Record<string, string> = variant === 'topup' ? {} : VARIANTS[variant as (typeof DRAIN_VARIANTS)[number]].workers;
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write(`--rounds takes an integer >= 1 (got "${values.rounds}")\n`);
  process.exit(2);
}
const statsWaitMs = Number(values['stats-wait']) * 1000;
if (!Number.isFinite(statsWaitMs) || statsWaitMs < 0) {
  process.stderr.write(`--stats-wait takes seconds >= 0 (got "${values['stats-wait']}")\n`);
  process.exit(2);
}
/** The checkouts that drain, alternating: a baseline (`--baseline-root`) first, then this one. */
const sides: { label: string; root?: string }[] = values['baseline-root']
  ? [{ label: 'baseline', root: path.resolve(values['baseline-root']) }, { label: 'this checkout' }]
  : [{ label: 'this checkout' }];

const run = Math.random().toString(36).slice(2, 8);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const redis = new Redis(REDIS_URL);
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);

interface Row {
  side: string;
  backlog: number;
  redisBytesPerEvent: number;
  ingestRssMb: number;
  workerReadyMb: number;
  workerPeakMb: number;
  workerEndMb: number;
  drainSeconds: number;
  /** The worker's user + system CPU from ready to drained, per event: the worker tier alone. */
  workerCpuMsPerEvent: number;
  /** The database's Postgres backends, same span, per event. */
  postgresCpuMsPerEvent: number;
  /** The Redis server, same span, per event (0 when it does not run on this host). */
  redisCpuMsPerEvent: number;
  /** The worker's round trips and statements to Postgres, same span, per event. */
  roundTripsPerEvent: number;
  statementsPerEvent: number;
  /** The database's commits (and rollbacks), same span, per event: every process's, the worker's nearly all. */
  transactionsPerEvent: number;
  /** The flow variant: the limited handler's runs, their mean time from lease to done, the share of its slots' time a run held them, and the share its calls used. */
  flow?: { runs: number; meanRunMs: number; held: number; share: number };
}

async function measure(size: number, side: { label: string; root?: string }, round: number, services: Service[], pools: Pool[], databases: string[]): Promise<Row> {
  const tag = `${size}_${side.root ? 'b' : 't'}${round}_${run}`;
  const db = await createTestDatabaseOn(`oncehook_bench_backlog_${tag}`);
  databases.push(db.name);
  const prefix = `bench-backlog-${tag}`;
  const env = {
    LOG_LEVEL: 'warn',
    DATABASE_URL: db.url,
    REDIS_URL,
    QUEUE_PREFIX: prefix,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    PORT: '0',
    HOST: '127.0.0.1',
    CLAIM_TIMEOUT_MS: '30000',
  };
  const pool = createPool(db.url, { max: 1 });
  pools.push(pool);
  const memoryBefore = await usedMemory();
  const ingest = spawnService('ingest', env, [], { root: side.root });
  services.push(ingest);
  const deliveries = Array.from({ length: size }, (_, n) => topUp(`evt_backlog_${run}_${size}_${n}`, n));
  await fireAll(await listeningUrl(ingest), deliveries);
  // The relay queues after the answers: wait until every event's job is waiting.
  const wait = queueKey(prefix, EVENT_QUEUE_NAME, 'wait');
  for (let i = 0; (await redis.llen(wait)) < size; i += 1) {
    if (i > 2400) throw new Error(`only ${await redis.llen(wait)} of ${size} jobs queued after 60 s`);
    await sleep(25);
  }
  const redisBytesPerEvent = Math.round(((await usedMemory()) - memoryBefore) / size);
  const ingestRssMb = rssMb(ingest.pid);

  const worker = spawnService(
    'worker',
    {
      ...env,
      METRICS_PORT: '0',
      WORKER_CONCURRENCY: '16',
      ...SHOP_ENV,
      ...variantWorkerEnv,
    },
    [],
    { root: side.root },
  );
  services.push(worker);
  const metricsPort = Number(/worker metrics on (\d+)/.exec(await worker.waitFor(/worker metrics on \d+/))?.[1]);
  await worker.waitFor(/worker ready/);
  const metricsUrls = { worker: `http://127.0.0.1:${metricsPort}/metrics` };
  const subjects: Subjects = { pool, database: db.name, redis, processes: { worker: worker.pid }, metricsUrls };
  const atReady = await snapshot(subjects);
  const started = performance.now();
  const cpuAtReady = cpuMs(worker.pid);
  const workerReadyMb = rssMb(worker.pid);
  let workerPeakMb = workerReadyMb;
  let lastCheck = 0;
  for (;;) {
    workerPeakMb = Math.max(workerPeakMb, rssMb(worker.pid));
    if (performance.now() - lastCheck > 1000) {
      lastCheck = performance.now();
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.events WHERE state = 'done'`);
      if ((rows[0]?.n ?? 0) >= size) break;
    }
    await sleep(250);
  }
  const drainSeconds = Math.round((performance.now() - started) / 100) / 10;
  // Postgres's transaction counters read again once every backend reported (settledDifference:
  // a drain of a second or less ends before the backends' stats are flushed).
  const spent = await settledDifference(atReady, subjects, statsWaitMs);
  const postgresMs = Object.entries(spent.cpuMs)
    .filter(([tier]) => tier.startsWith('postgres'))
    .reduce((sum, [, ms]) => sum + ms, 0);
  const perEvent = (ms: number) => Math.round((ms / size) * 1000) / 1000;
  const row: Row = {
    side: side.label,
    backlog: size,
    redisBytesPerEvent,
    ingestRssMb,
    workerReadyMb,
    workerPeakMb,
    workerEndMb: rssMb(worker.pid),
    drainSeconds,
    workerCpuMsPerEvent: perEvent(cpuMs(worker.pid) - cpuAtReady),
    postgresCpuMsPerEvent: perEvent(postgresMs),
    redisCpuMsPerEvent: perEvent(spent.cpuMs.redis ?? 0),
    roundTripsPerEvent: Math.round(((spent.roundTrips.worker ?? 0) / size) * 100) / 100,
    statementsPerEvent: Math.round(((spent.statements.worker ?? 0) / size) * 100) / 100,
    transactionsPerEvent: Math.round((spent.transactions / size) * 100) / 100,
  };
  if (variant === 'flow') row.flow = await flowShare(pool);
  await Promise.all([ingest.kill9(), worker.kill9()]);
  // Done jobs are removed by the worker; what is left of the prefix goes.
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  return row;
}

/**
 * The flow variant's limited handler (scripts/bench/variant-handlers.ts): its slots' capacity is
 * FLOW_SLOTS calls of FLOW_CALL_MS at a time; its share is the calls' time over that capacity
 * from its first lease to its last done (1.0: a slot never idle and never held but by a call).
 */
async function flowShare(pool: Pool): Promise<Row['flow']> {
  const { rows } = await pool.query<{ runs: number; mean: number; span: number }>(
    `SELECT count(*)::int AS runs, avg(extract(epoch FROM ended_at - started_at))::float8 * 1000 AS mean,
            extract(epoch FROM max(ended_at) - min(started_at))::float8 * 1000 AS span
       FROM oncehook.attempt_history a JOIN oncehook.handler_runs r ON r.id = a.run_id
      WHERE r.handler = 'bench.topup-limited' AND a.outcome = 'done'`,
  );
  const { runs, mean, span } = rows[0]!;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  // held: the slots' time with a run in them (lease to done); share: with a call in them.
  return { runs, meanRunMs: Math.round(mean * 10) / 10, held: round((runs * mean) / FLOW_SLOTS / span), share: round((runs * FLOW_CALL_MS) / FLOW_SLOTS / span) };
}

const services: Service[] = [];
const pools: Pool[] = [];
const databases: string[] = [];
const rows: Row[] = [];
try {
  for (const size of sizes)
    for (let round = 1; round <= rounds; round += 1)
      for (const side of sides) {
        process.stdout.write(`backlog of ${size} (${side.label}, ${variant}, round ${round} of ${rounds}): queued by an ingest alone, then drained by one worker...\n`);
        rows.push(await measure(size, side, round, services, pools, databases));
      }
} finally {
  await releaseAll({ services, pools, databases });
  redis.disconnect();
}
process.stdout.write(
  `\nvariant: ${variant}\nside          | backlog | Redis bytes per queued event | ingest RSS MB | worker RSS MB: ready, peak, end | drain s | events/s | CPU ms/event: worker, Postgres, Redis | worker round trips, statements per event | pg transactions per event\n`,
);
for (const r of rows)
  process.stdout.write(
    `${r.side.padEnd(13)} | ${String(r.backlog).padStart(7)} | ${String(r.redisBytesPerEvent).padStart(28)} | ${String(r.ingestRssMb).padStart(13)} | ${`${r.workerReadyMb}, ${r.workerPeakMb}, ${r.workerEndMb}`.padStart(31)} | ${String(r.drainSeconds).padStart(7)} | ${String(Math.round(r.backlog / r.drainSeconds)).padStart(8)} | ${r.workerCpuMsPerEvent}, ${r.postgresCpuMsPerEvent}, ${r.redisCpuMsPerEvent} | ${r.roundTripsPerEvent}, ${r.statementsPerEvent} | ${r.transactionsPerEvent}\n`,
  );
if (variant === 'flow') {
  process.stdout.write(`\nthe limited handler (${FLOW_SLOTS} slots, a ${FLOW_CALL_MS} ms step each, beside the top-ups): share of its slots' capacity, first lease to last done\n`);
  for (const r of rows)
    if (r.flow)
      process.stdout.write(
        `${r.side.padEnd(13)} | ${r.flow.runs} runs | mean run ${r.flow.meanRunMs} ms lease to done | slots held a run ${Math.round(r.flow.held * 100)}% of the time | share of capacity (calls) ${Math.round(r.flow.share * 100)}%\n`,
      );
}
if (sides.length === 2) {
  // Before and after, per size: the means over the rounds, and their ratio.
  process.stdout.write('\nthis checkout against the baseline (means over the rounds)\nbacklog | worker CPU ms/event | Postgres CPU ms/event | worker round trips per event\n');
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const size of sizes) {
    const of = (label: string) => rows.filter((r) => r.backlog === size && r.side === label);
    const [b, t] = [of('baseline'), of('this checkout')];
    const pair = (f: (r: Row) => number) => {
      const [x, y] = [mean(b.map(f)), mean(t.map(f))];
      const spread = ratioSpread(t.map(f), b.map(f));
      return `${x.toFixed(3)} -> ${y.toFixed(3)} (${(y / x).toFixed(2)}x${spread ? `, rounds ${spread}` : ''})`;
    };
    process.stdout.write(`${String(size).padStart(7)} | ${pair((r) => r.workerCpuMsPerEvent)} | ${pair((r) => r.postgresCpuMsPerEvent)} | ${pair((r) => r.roundTripsPerEvent)}\n`);
  }
}
process.exit(0);
