/**
 * `npm run bench:backlog -- [--sizes 1000,10000,30000]`: what a backlog costs in memory, and
 * whether a worker's memory grows with the backlog it drains.
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
 * idle ingest's) and of the Redis server, per event: the other two tiers a drain costs.
 */
import { Redis } from 'ioredis';
import { parseScriptArgs, REDIS_URL, spawnService, STRIPE_SECRET, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { EVENT_QUEUE_NAME, queueKey } from '@oncehook/core';
import { cpuMs, difference, rssMb, snapshot, type Subjects } from './bench/costs.js';
import { createTestDatabaseOn, releaseAll } from './bench/databases.js';
import { fireAll, listeningUrl, SHOP_ENV, topUp } from './bench/e2e.js';

const { values } = parseScriptArgs(import.meta.url, { options: { sizes: { type: 'string', default: '1000,10000,30000' } } });
const sizes = values.sizes.split(',').map(Number);
if (sizes.some((n) => !Number.isInteger(n) || n < 100)) {
  process.stderr.write(`--sizes takes comma-separated integers >= 100 (got "${values.sizes}")\n`);
  process.exit(2);
}

const run = Math.random().toString(36).slice(2, 8);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const redis = new Redis(REDIS_URL);
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);

interface Row {
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
}

async function measure(size: number, services: Service[], pools: Pool[], databases: string[]): Promise<Row> {
  const db = await createTestDatabaseOn(`oncehook_bench_backlog_${size}_${run}`);
  databases.push(db.name);
  const prefix = `bench-backlog-${size}-${run}`;
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
  const ingest = spawnService('ingest', env);
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

  const worker = spawnService('worker', {
    ...env,
    METRICS_PORT: '0',
    WORKER_CONCURRENCY: '16',
    ...SHOP_ENV,
  });
  services.push(worker);
  await worker.waitFor(/worker ready/);
  const subjects: Subjects = { pool, database: db.name, redis, processes: { worker: worker.pid }, metricsUrls: {} };
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
  const spent = difference(atReady, await snapshot(subjects));
  const postgresMs = Object.entries(spent.cpuMs)
    .filter(([tier]) => tier.startsWith('postgres'))
    .reduce((sum, [, ms]) => sum + ms, 0);
  const perEvent = (ms: number) => Math.round((ms / size) * 1000) / 1000;
  const row: Row = {
    backlog: size,
    redisBytesPerEvent,
    ingestRssMb,
    workerReadyMb,
    workerPeakMb,
    workerEndMb: rssMb(worker.pid),
    drainSeconds: Math.round((performance.now() - started) / 100) / 10,
    workerCpuMsPerEvent: perEvent(cpuMs(worker.pid) - cpuAtReady),
    postgresCpuMsPerEvent: perEvent(postgresMs),
    redisCpuMsPerEvent: perEvent(spent.cpuMs.redis ?? 0),
  };
  await Promise.all([ingest.kill9(), worker.kill9()]);
  // Done jobs are removed by the worker; what is left of the prefix goes.
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  return row;
}

const services: Service[] = [];
const pools: Pool[] = [];
const databases: string[] = [];
const rows: Row[] = [];
try {
  for (const size of sizes) {
    process.stdout.write(`backlog of ${size}: queued by an ingest alone, then drained by one worker...\n`);
    rows.push(await measure(size, services, pools, databases));
  }
} finally {
  await releaseAll({ services, pools, databases });
  redis.disconnect();
}
process.stdout.write('\nbacklog | Redis bytes per queued event | ingest RSS MB | worker RSS MB: ready, peak, end | drain s | events/s | CPU ms/event: worker, Postgres, Redis\n');
for (const r of rows)
  process.stdout.write(
    `${String(r.backlog).padStart(7)} | ${String(r.redisBytesPerEvent).padStart(28)} | ${String(r.ingestRssMb).padStart(13)} | ${`${r.workerReadyMb}, ${r.workerPeakMb}, ${r.workerEndMb}`.padStart(31)} | ${String(r.drainSeconds).padStart(7)} | ${String(Math.round(r.backlog / r.drainSeconds)).padStart(8)} | ${r.workerCpuMsPerEvent}, ${r.postgresCpuMsPerEvent}, ${r.redisCpuMsPerEvent}\n`,
  );
process.exit(0);
