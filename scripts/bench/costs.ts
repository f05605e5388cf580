/**
 * What a piece of work costs each tier, read from outside the processes (Linux /proc, Postgres
 * statistics views, Redis INFO), so the figures include everything a deployment would pay:
 *
 * - CPU of each process (user + system, /proc/<pid>/stat) and of the Postgres backends serving
 *   a database (their pids from pg_stat_activity, grouped by application_name);
 * - Postgres transactions (pg_stat_database xact_commit + xact_rollback), rows written
 *   (tup_inserted + tup_updated + tup_deleted) and WAL bytes (pg_current_wal_lsn);
 * - Postgres statements: counted by the processes themselves (oncehook_db_statements_total on
 *   their /metrics), because pg_stat_statements needs shared_preload_libraries;
 * - Redis commands (INFO commandstats, all commands; BullMQ's Lua scripts count one EVALSHA
 *   each) and the Redis server's own CPU (INFO server process_id, when it runs on this host).
 *
 * `snapshot()` before and after, `difference()` between them. Postgres and Redis counters are
 * server-wide: nothing else should run during a measurement.
 */
import { readFileSync } from 'node:fs';
import { residentMb } from '@oncehook/harness';
import type { Redis } from 'ioredis';
import type { Pool } from '@oncehook/shared';

/** Resident memory of a process in whole MiB (0 when gone). */
export function rssMb(pid: number): number {
  const mb = residentMb(pid);
  return Number.isNaN(mb) ? 0 : Math.round(mb);
}

/** User + system CPU of a process so far, in ms (0 when gone). */
export function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks at 100 Hz
  } catch {
    return 0;
  }
}

export interface Snapshot {
  processes: Record<string, number>;
  /** CPU ms of the database's backends by application_name, keyed by backend pid. */
  backends: Map<number, { app: string; cpu: number }>;
  commits: number;
  rowsWritten: number;
  walBytes: bigint;
  redisCommands: number;
  redisCpu: number;
  statements: Record<string, number>;
  roundTrips: Record<string, number>;
}

export interface Costs {
  cpuMs: Record<string, number>;
  transactions: number;
  rowsWritten: number;
  walBytes: number;
  redisCommands: number;
  statements: Record<string, number>;
  roundTrips: Record<string, number>;
}

async function redisCommands(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let calls = 0;
  for (const match of info.matchAll(/calls=(\d+)/g)) calls += Number(match[1]);
  return calls;
}

async function redisPid(redis: Redis): Promise<number> {
  const match = /process_id:(\d+)/.exec(await redis.info('server'));
  return match ? Number(match[1]) : 0;
}

/** The value of a counter (summed over its series) on a /metrics page; 0 when absent or unreachable. */
async function counterOn(url: string, name: string): Promise<number> {
  try {
    const text = await (await fetch(url)).text();
    let sum = 0;
    for (const line of text.split('\n')) if (line.startsWith(name)) sum += Number(line.split(' ').at(-1));
    return sum;
  } catch {
    return 0;
  }
}

export interface Subjects {
  pool: Pool;
  database: string;
  /** The Redis server, or every node of a Redis Cluster (commands and CPU are summed). */
  redis: Redis | readonly Redis[];
  /** Process name -> pid (ingest, worker-1, ...). */
  processes: Record<string, number>;
  /** Process name -> its /metrics URL, for the statements it issued. */
  metricsUrls: Record<string, string>;
}

export async function snapshot(s: Subjects): Promise<Snapshot> {
  const { rows: backends } = await s.pool.query<{ pid: number; app: string }>(
    'SELECT pid, application_name AS app FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
    [s.database],
  );
  const { rows: db } = await s.pool.query<{ commits: string; rows: string; wal: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS commits, (tup_inserted + tup_updated + tup_deleted)::text AS rows,
            (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS wal
       FROM pg_stat_database WHERE datname = $1`,
    [s.database],
  );
  const statements: Record<string, number> = {};
  const roundTrips: Record<string, number> = {};
  for (const [name, url] of Object.entries(s.metricsUrls)) {
    statements[name] = await counterOn(url, 'oncehook_db_statements_total');
    roundTrips[name] = await counterOn(url, 'oncehook_db_round_trips_total');
  }
  const nodes = Array.isArray(s.redis) ? s.redis : [s.redis as Redis];
  const pids = await Promise.all(nodes.map(redisPid));
  const commands = await Promise.all(nodes.map(redisCommands));
  return {
    processes: Object.fromEntries(Object.entries(s.processes).map(([name, p]) => [name, cpuMs(p)])),
    backends: new Map(backends.map((b) => [b.pid, { app: b.app, cpu: cpuMs(b.pid) }])),
    commits: Number(db[0]?.commits ?? 0),
    rowsWritten: Number(db[0]?.rows ?? 0),
    walBytes: BigInt((db[0]?.wal ?? '0').split('.')[0]!),
    redisCommands: commands.reduce((sum, n) => sum + n, 0),
    redisCpu: pids.reduce((sum, pid) => sum + (pid ? cpuMs(pid) : 0), 0),
    statements,
    roundTrips,
  };
}

/**
 * after - before. A backend that appeared during the measurement counts from 0 (its whole life);
 * one that exited before `after` is lost (pools keep their connections for 30 s idle, longer
 * than a measurement's gaps).
 */
export function difference(before: Snapshot, after: Snapshot): Costs {
  const cpu: Record<string, number> = {};
  for (const [name, value] of Object.entries(after.processes)) cpu[name] = value - (before.processes[name] ?? 0);
  for (const [pid, backend] of after.backends) {
    const key = `postgres (${backend.app || 'other'})`;
    cpu[key] = (cpu[key] ?? 0) + backend.cpu - (before.backends.get(pid)?.cpu ?? 0);
  }
  cpu.redis = after.redisCpu - before.redisCpu;
  const statements: Record<string, number> = {};
  for (const [name, value] of Object.entries(after.statements)) statements[name] = value - (before.statements[name] ?? 0);
  const roundTrips: Record<string, number> = {};
  for (const [name, value] of Object.entries(after.roundTrips)) roundTrips[name] = value - (before.roundTrips[name] ?? 0);
  return {
    cpuMs: cpu,
    transactions: after.commits - before.commits,
    rowsWritten: after.rowsWritten - before.rowsWritten,
    walBytes: Number(after.walBytes - before.walBytes),
    redisCommands: after.redisCommands - before.redisCommands,
    statements,
    roundTrips,
  };
}

/**
 * after - before, where `after` is taken now for CPU, WAL, Redis and statements, and Postgres's
 * transaction and row counters are read again `statsWaitMs` later. A backend that goes idle
 * within a second of its last report holds its counters back until its idle timeout
 * (PGSTAT_IDLE_INTERVAL, 10 s, PostgreSQL 15), so a reading right at the end misses the last
 * seconds' transactions; waiting 11 s lets every idle backend report (CPU is not read then:
 * it would count the wait).
 */
export async function settledDifference(before: Snapshot, subjects: Subjects, statsWaitMs: number): Promise<Costs> {
  const now = await snapshot(subjects);
  const costs = difference(before, now);
  if (statsWaitMs <= 0) return costs;
  await new Promise((resolve) => setTimeout(resolve, statsWaitMs));
  const settled = await snapshot(subjects);
  return { ...costs, transactions: settled.commits - before.commits, rowsWritten: settled.rowsWritten - before.rowsWritten };
}
