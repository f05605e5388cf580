/**
 * `npm run bench:cluster -- [--events N] [--workers W] [--shards 1,3,6] [--rounds R]`
 *
 * The queue on a Redis Cluster beside one Redis, end to end (delivery to `done`), in one run:
 * a Redis of its own and a Redis Cluster of its own (3 primaries, 3 replicas, all on this
 * machine), the same ingest and W workers (WORKER_CONCURRENCY=16) against each, N Stripe
 * top-ups delivered a mean of 3 times each (bench/e2e.ts). Rows: one Redis with QUEUE_SHARDS=1,
 * then the cluster with each shard count (one shard: a braced prefix, `{bench-...}`).
 * Printed: events/s, each row's ratio to one Redis, CPU per event by tier (Redis summed over
 * every node) and Redis commands per event. With R rounds the rows alternate R times.
 *
 * On 2 cores every node, Postgres, ingest and the workers share the same CPUs: the figures say
 * what the cluster client and the sharding cost, not what a cluster of real machines carries.
 */
import { writeFile } from 'node:fs/promises';
import { Redis } from 'ioredis';
import { countArg, killAllServices, parseScriptArgs, startOwnRedis, startOwnRedisCluster, STRIPE_SECRET, type Service } from '@oncehook/harness';
import type { Pool } from '@oncehook/shared';
import { dropDatabase } from './bench/databases.js';
import { measureEndToEnd, type E2eRow } from './bench/e2e.js';

interface Row {
  label: string;
  shards: number;
  row: E2eRow;
}

const { values } = parseScriptArgs(import.meta.url, {
  options: {
    events: { type: 'string', default: '2000' },
    workers: { type: 'string', default: '2' },
    shards: { type: 'string', default: '1,3,6' },
    rounds: { type: 'string', default: '1' },
    /** Also write the rows as JSON here. */
    'report-file': { type: 'string' },
  },
});
const events = countArg('--events', values.events);
const workers = countArg('--workers', values.workers);
const rounds = countArg('--rounds', values.rounds);
const shardCounts = values.shards.split(',').map((shards) => countArg('--shards', shards));

const log = (line: string) => process.stdout.write(`${line}\n`);
const run = Math.random().toString(36).slice(2, 8);
log(`bench:cluster ${run}: ${events} events x ~3 deliveries, ${workers} workers, one Redis and a 3-primary cluster with QUEUE_SHARDS ${shardCounts.join(', ')}`);

const [single, cluster] = await Promise.all([startOwnRedis(), startOwnRedisCluster()]);
const singleClient = new Redis(single.url);
const nodeClients = cluster.nodes.map((node) => new Redis(`redis://${node.address}`));
const services: Service[] = [];
const databases: string[] = [];
const pools: Pool[] = [];
const rows: Row[] = [];
const env = { LOG_LEVEL: 'warn', STRIPE_WEBHOOK_SECRET: STRIPE_SECRET, PORT: '0', HOST: '127.0.0.1', DATABASE_POOL_SIZE: '10' };
let exitCode = 0;
try {
  for (let round = 0; round < rounds; round += 1) {
    const configs = [{ label: 'one Redis', shards: 1, onCluster: false }, ...shardCounts.map((shards) => ({ label: 'cluster', shards, onCluster: true }))];
    for (const [i, config] of configs.entries()) {
      const tag = `${run}${round}${i}`;
      const queueEnv: Record<string, string> = config.onCluster
        ? { REDIS_CLUSTER_NODES: cluster.seeds, QUEUE_SHARDS: String(config.shards) }
        : { REDIS_URL: single.url, QUEUE_SHARDS: '1' };
      const row = await measureEndToEnd({
        run: tag,
        workers,
        events,
        env,
        queueEnv,
        queuePrefix: config.onCluster && config.shards === 1 ? `{bench-${tag}}` : `bench-${tag}`,
        redis: config.onCluster ? nodeClients : singleClient,
        services,
        databases,
        pools,
        label: config.label,
      });
      rows.push({ label: config.label, shards: config.shards, row });
      log(`  ${config.label} shards=${config.shards}: ${row.events} events in ${row.seconds} s = ${row.eventsPerSecond} events/s; cpu/event ${row.cpuMsPerEvent.total} ms`);
      await killAllServices();
    }
  }
  // Medians over the rounds, per configuration.
  const median = (list: number[]) => {
    const sorted = [...list].sort((a, b) => a - b);
    const middle = Math.floor(sorted.length / 2);
    return sorted.length % 2 === 1 ? sorted[middle]! : Number(((sorted[middle - 1]! + sorted[middle]!) / 2).toFixed(2));
  };
  const keys = [...new Set(rows.map((r) => `${r.label}|${r.shards}`))];
  const summary = keys.map((key) => {
    const mine = rows.filter((r) => `${r.label}|${r.shards}` === key).map((r) => r.row);
    return {
      key,
      eventsPerSecond: median(mine.map((r) => r.eventsPerSecond)),
      cpu: median(mine.map((r) => r.cpuMsPerEvent.total)),
      cpuRedis: median(mine.map((r) => r.cpuMsPerEvent.redis)),
      redisCommands: median(mine.map((r) => r.perEvent.redisCommands)),
    };
  });
  const base = summary[0]!;
  log(`\nqueue                 | shards | events/s | vs one Redis | CPU/event ms (redis) | redis commands/event   (median of ${rounds} round(s))`);
  for (const s of summary) {
    const [label, shards] = s.key.split('|');
    log(
      `${label!.padEnd(21)} | ${shards!.padStart(6)} | ${String(s.eventsPerSecond).padStart(8)} | ${(s.eventsPerSecond / base.eventsPerSecond).toFixed(2).padStart(11)}x | ${`${s.cpu} (${s.cpuRedis})`.padStart(20)} | ${s.redisCommands}`,
    );
  }
  if (values['report-file'])
    await writeFile(values['report-file'], JSON.stringify({ summary, rows: rows.map((r) => ({ ...r.row, shards: r.shards, costs: undefined })) }, null, 2));
} catch (error) {
  process.stderr.write(`bench:cluster failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  exitCode = 1;
} finally {
  await killAllServices();
  await Promise.all(pools.map((pool) => pool.end().catch(() => {})));
  for (const name of databases) await dropDatabase(name).catch(() => {});
  singleClient.disconnect();
  for (const client of nodeClients) client.disconnect();
  await Promise.all([single.kill9(), cluster.stop()]);
}
process.exit(exitCode);
