/**
 * The queue contract between ingest, the reconciler and the workers.
 *
 * Redis is a delivery mechanism, not a record: Postgres holds every event, and the worker's
 * guarded claims (dispatchAndLease, acquireRun) are what really prevent double processing. The jobId derived
 * from the event key only saves work: while a job with that id exists, adding it again is a
 * no-op in BullMQ. Once a job is removed (completed and cleaned, or Redis lost it) the same
 * id can be added again, which is exactly what recovery needs.
 */
import { Queue, Worker, type JobType } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { StartupError, TimeoutError } from '@oncehook/shared';
import { EVENT_QUEUE_NAME, eventQueueNames, queueKey } from './queue-names.js';
import { eventKeyDigest } from './event-key.js';
import type { EventJobData, EventJobOptions } from './vocabulary.js';
import {
  claimJobsOn,
  closePostgresQueueStore,
  openPostgresQueueStore,
  PostgresEventQueue,
  PostgresQueueWorker,
  type ClaimJobs,
  type PostgresQueueStore,
} from './postgres-queue.js';

export { EVENT_QUEUE_NAME, eventQueueNames };

/** Name of the job (shown in Bull Board). */
export const EVENT_JOB_NAME = 'event';

/**
 * BullMQ jobId of a job: one per (event) for the dispatch, one per (event, handler, attempt)
 * for a run.
 *
 * - Every enqueue for the same dispatch or the same run attempt (ingest, a duplicate
 *   delivery's nudge, the reconciler) collapses into one job while that job exists.
 * - A run's retry or its recovery after a crash is a new attempt, hence a new job id: it never
 *   collides with the old job, which may still sit `active` on a dead worker until BullMQ's
 *   stalled check notices (when that old job runs again, its guarded claim finds nothing to do).
 *
 * BullMQ rejects custom ids that look like integers or contain ':' (its key separator), and
 * provider ids may contain anything, so the key is hashed (event-key.ts): `evt-` + 32 hex
 * digits + `-d` for a dispatch; `run-` + 32 hex digits of (event key, handler) + `-<attempt>`,
 * or `-g<generation>-<attempt>` from a replay's generation 1 on (a new generation's attempt 1
 * must not be swallowed by the completed job of generation 0's attempt 1), then `-w<waits>`
 * for a job flow control scheduled (a run waiting for a slot is polled by a new job each time:
 * the same id would be swallowed by the job that is still running).
 */
export function jobIdFor(job: Pick<EventJobData, 'source' | 'eventId' | 'handler' | 'attempt' | 'generation' | 'wait'>): string {
  if (job.handler === undefined) return `evt-${eventKeyDigest(job.source, job.eventId).slice(0, 32)}-d`;
  // mutant: run-job-id-ignores-generation
  const generation = job.generation ? `g${job.generation}-` : '';
  const wait = job.wait ? `-w${job.wait}` : '';
  return `run-${eventKeyDigest(job.source, job.eventId, job.handler).slice(0, 32)}-${generation}${job.attempt}${wait}`;
}

/**
 * Job options for every event job. Handler failures are not BullMQ retries: the worker
 * records them on the row and enqueues the next attempt itself, delayed by the backoff (see
 * packages/core/src/event-worker.ts). BullMQ's own retries only cover a processor that threw before
 * reaching a verdict (Postgres unreachable): a few quick tries, then the reconciler.
 */
export const EVENT_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1_000 },
  // Keep a window of finished jobs for Bull Board; the event rows are the real history.
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 24 * 3600, count: 5000 },
} as const;

export type RedisRole = 'producer' | 'worker';

/** A connection to Redis: one server (REDIS_URL), or a Redis Cluster (REDIS_CLUSTER_NODES). */
export type RedisClient = Redis | Cluster;

/**
 * ioredis connection for BullMQ.
 * - producer (ingest, reconciler): enableOfflineQueue=false so an add fails at once while Redis
 *   is down instead of hanging the webhook response; the reconciler re-enqueues later.
 * - worker: maxRetriesPerRequest=null, as BullMQ requires for blocking connections; it waits
 *   for Redis to come back rather than failing jobs.
 */
export function createRedis(url: string, role: RedisRole): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    // Reconnect quickly after a Redis restart; capped so a long outage does not spin.
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    connectionName: `oncehook-${role}`,
  });
  // Connection errors are reported through readiness and failed commands; an unhandled
  // 'error' event would crash the process.
  redis.on('error', () => {});
  return redis;
}

/** The seed nodes of a Redis Cluster and how to reach them (REDIS_CLUSTER_NODES, parsed by the command's config). */
export interface ClusterSeeds {
  nodes: { host: string; port: number }[];
  tls: boolean;
  username?: string;
  password?: string;
}

/**
 * ioredis's Cluster client over the seed nodes, with the roles' settings of createRedis. It
 * learns the slot map from the seeds, follows MOVED and ASK, and refreshes the map after a
 * failover. On TLS (`rediss://`) the node addresses the cluster announces are used as they are
 * (dnsLookup), as managed clusters (ElastiCache, MemoryDB) require for certificate checks.
 */
export function createRedisCluster(seeds: ClusterSeeds, role: RedisRole): Cluster {
  const cluster = new Cluster(seeds.nodes, {
    enableOfflineQueue: role === 'worker',
    clusterRetryStrategy: (times) => Math.min(times * 200, 2_000),
    // A failover takes the cluster a few seconds: retry commands meanwhile instead of failing.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: 2_000,
    ...(seeds.tls ? { dnsLookup: (address: string, callback: (error: null, address: string) => void) => callback(null, address) } : {}),
    redisOptions: {
      maxRetriesPerRequest: role === 'worker' ? null : 1,
      connectionName: `oncehook-${role}`,
      ...(seeds.username ? { username: seeds.username } : {}),
      ...(seeds.password ? { password: seeds.password } : {}),
      ...(seeds.tls ? { tls: {} } : {}),
    },
  });
  cluster.on('error', () => {});
  return cluster;
}

/** Where a process's Redis is: REDIS_CLUSTER_NODES when set, else REDIS_URL. */
export interface RedisSettings {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: ClusterSeeds | undefined;
}

export function createRedisClient(settings: RedisSettings, role: RedisRole): RedisClient {
  // mutant: cluster-nodes-ignored
  return settings.REDIS_CLUSTER_NODES ? createRedisCluster(settings.REDIS_CLUSTER_NODES, role) : createRedis(settings.REDIS_URL, role);
}

/** Where BullMQ keeps the jobs (QUEUE_BACKEND). */
export type QueueBackend = 'redis' | 'postgres';

/**
 * The queue store of one process: Redis (the default), or a table of Oncehook's own in Postgres
 * (QUEUE_BACKEND=postgres, Postgres alone; postgres-queue.ts, docs/architecture.md). Queues
 * and workers are built from it, so nothing else knows which one it is.
 */
export type QueueConnection =
  | { readonly backend: 'redis'; readonly redis: RedisClient }
  | {
      readonly backend: 'postgres';
      /** The queue table's pool (every queue and worker of the process) and schema. */
      readonly store: PostgresQueueStore;
      /** A one-connection pool of our own, for readiness pings (never behind busy queue connections). */
      readonly pingPool: pg.Pool;
    };

/** A job that waits in a queue, as either store answers it. */
export interface QueuedJob {
  id?: string | undefined;
  data: EventJobData;
  /** When it was added (ms since the epoch). */
  timestamp: number;
  opts: { priority?: number | undefined; delay?: number | undefined; lifo?: boolean | undefined };
  /** A failed job's error (BullMQ on Redis keeps dead letters; the Postgres queue does not). */
  failedReason?: string | undefined;
  getState(): Promise<string>;
  remove(): Promise<unknown>;
}

/**
 * What Oncehook asks of an event queue (a shard), on either store: BullMQ's Queue on Redis,
 * PostgresEventQueue on Postgres. Only these methods: code that needs more of BullMQ (Bull Board)
 * asks bullQueueOf first.
 */
export interface EventQueue {
  readonly name: string;
  add(name: string, data: EventJobData, opts: EventJobOptions): Promise<unknown>;
  addBulk(jobs: { name: string; data: EventJobData; opts: EventJobOptions }[]): Promise<unknown>;
  getJob(id: string): Promise<QueuedJob | undefined>;
  /** Counts by BullMQ's state names (`wait`/`waiting`, `delayed`, `active`, `completed`, `failed`). */
  getJobCounts(...types: JobType[]): Promise<Record<string, number>>;
  getJobs(types: JobType[], start?: number, end?: number, asc?: boolean): Promise<QueuedJob[]>;
  getDelayed(start?: number, end?: number): Promise<QueuedJob[]>;
  getFailed(start?: number, end?: number): Promise<QueuedJob[]>;
  /** Jobs not yet taken: waiting, prioritized or delayed. */
  count(): Promise<number>;
  /** Every job of the queue removed (tests, `oncehook demo`). */
  obliterate(opts?: { force?: boolean }): Promise<void>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** A consumer of one event queue, on either store: BullMQ's Worker, or PostgresQueueWorker. */
export interface EventQueueWorker {
  readonly name: string;
  run(): Promise<unknown>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** What a queue worker runs per job. */
export type EventJobProcessor<R> = (job: { id?: string | undefined; data: EventJobData }) => Promise<R>;

/** The settings a worker takes on either store (BullMQ's lock settings apply on Redis only). */
export interface EventQueueWorkerOptions {
  prefix: string;
  concurrency: number;
  autorun?: boolean;
  /** Redis: BullMQ's job lock. Postgres: no job lock (a taken job is deleted; the reconciler recovers). */
  lockDuration?: number;
  stalledInterval?: number;
  maxStalledCount?: number;
}

export interface QueueConnectionSettings extends RedisSettings {
  QUEUE_BACKEND: QueueBackend;
  DATABASE_URL: string;
  QUEUE_PREFIX: string;
}

/**
 * The Postgres schema of BullMQ's tables for a queue prefix: the prefix (a Redis key prefix)
 * made an identifier, plus `_queue` (`oncehook` -> `oncehook_queue`), so two installations
 * with different prefixes never share jobs, as on Redis, and the queue's tables never mix with
 * Oncehook's own schema.
 */
export function queueSchemaFor(prefix: string): string {
  const base = prefix
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .replace(/^([^a-z_])/, '_$1');
  return `${base.slice(0, 57)}_queue`;
}

/**
 * Opens the queue store of a process. On Postgres, the queue's table is created at first use
 * (under an advisory lock, so processes starting together create it once).
 */
export function openQueueConnection(settings: QueueConnectionSettings, role: RedisRole, options: { poolSize?: number } = {}): QueueConnection {
  // mutant: pg-queue-ignored
  if (settings.QUEUE_BACKEND === 'redis') return { backend: 'redis', redis: createRedisClient(settings, role) };
  const pingPool = new pg.Pool({ connectionString: settings.DATABASE_URL, max: 1, connectionTimeoutMillis: 2_000, application_name: 'oncehook-queue-ping' });
  pingPool.on('error', () => {});
  const store = openPostgresQueueStore(settings.DATABASE_URL, queueSchemaFor(settings.QUEUE_PREFIX), {
    poolSize: options.poolSize ?? 4,
    applicationName: `oncehook-queue-${role}`,
  });
  return { backend: 'postgres', store, pingPool };
}

/**
 * Readiness: the queue's store can take a job on every shard, not just answer PING. On Redis,
 * one write per queue, to a key of that queue's own (`<prefix>:<queue>:oncehook-ready`, in the
 * queue's hash slot, expiring after a minute): it fails where an add would, with MOVED (a
 * plain client on one node of a cluster), CLUSTERDOWN, READONLY (a replica) or OOM. The error
 * says what to do (readinessProblem). On Postgres, the queue's table exists and the pool answers.
 */
export async function pingQueue(connection: QueueConnection, prefix: string, names: readonly string[]): Promise<unknown> {
  if (connection.backend === 'postgres') {
    // The queue's table exists (created at the first use; a user without CREATE fails here, by name).
    await connection.store.ready();
    return connection.pingPool.query('SELECT 1');
  }
  const { redis } = connection;
  // mutant: readiness-ping-only
  return Promise.all(names.map((name) => redis.set(queueKey(prefix, name, 'oncehook-ready'), String(Date.now()), 'PX', 60_000)));
}

/** What a failed readiness write means for the operator, in one line without addresses. */
export function readinessProblem(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (/\bMOVED\b|\bASK\b/.test(message)) return 'REDIS_URL names one node of a Redis Cluster: set REDIS_CLUSTER_NODES to the cluster nodes';
  if (message.includes('CLUSTERDOWN')) return 'the Redis Cluster is down (a slot has no primary)';
  if (message.includes('READONLY')) return 'Redis is a read-only replica: point REDIS_URL at the primary';
  if (message.includes('OOM')) return 'Redis is out of memory (maxmemory) and refuses writes';
  if (message.includes('cluster support disabled')) return 'REDIS_CLUSTER_NODES names a Redis that is not a cluster: use REDIS_URL';
  if (/Cluster isn't ready|Failed to refresh slots cache/.test(message)) return 'the Redis Cluster is not reachable (REDIS_CLUSTER_NODES)';
  if (error instanceof TimeoutError) return 'Redis did not answer in time';
  return 'Redis is unreachable or refused the write';
}

/**
 * At start: a REDIS_URL that is one node of a Redis Cluster is refused (a plain client there
 * can reach only the slots of that node: every other shard's add fails with MOVED, its events
 * stay `received`), and so are REDIS_CLUSTER_NODES that name a Redis without cluster mode. A
 * Redis that does not answer is not refused here: workers wait for it, and readiness says so.
 */
export async function checkRedisMode(settings: RedisSettings & { QUEUE_BACKEND: QueueBackend }): Promise<void> {
  if (settings.QUEUE_BACKEND !== 'redis') return;
  const seed = settings.REDIS_CLUSTER_NODES;
  const probe = seed
    ? new Redis({
        host: seed.nodes[0]!.host,
        port: seed.nodes[0]!.port,
        ...(seed.username ? { username: seed.username } : {}),
        ...(seed.password ? { password: seed.password } : {}),
        ...(seed.tls ? { tls: {} } : {}),
        lazyConnect: true,
        connectTimeout: 3_000,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        enableOfflineQueue: false,
      })
    : new Redis(settings.REDIS_URL, { lazyConnect: true, connectTimeout: 3_000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
  probe.on('error', () => {});
  let info: string;
  try {
    await probe.connect();
    info = await probe.info('cluster');
  } catch {
    return;
  } finally {
    probe.disconnect();
  }
  const clustered = /cluster_enabled:1/.test(info);
  // mutant: one-cluster-node-accepted
  if (clustered && !seed) {
    throw new StartupError(
      "REDIS_URL names one node of a Redis Cluster (cluster_enabled:1): a plain connection reaches only that node's slots, and the other shards' jobs would fail with MOVED. Set REDIS_CLUSTER_NODES=redis://host:port,redis://host:port (two or three nodes of the cluster) instead",
    );
  }
  if (!clustered && seed) {
    throw new StartupError('REDIS_CLUSTER_NODES names a Redis without cluster mode (cluster_enabled:0): unset REDIS_CLUSTER_NODES and set REDIS_URL to that server');
  }
}

/** Closes what openQueueConnection opened (the queues and workers close their own). */
export async function closeQueueConnection(connection: QueueConnection): Promise<void> {
  if (connection.backend === 'redis') connection.redis.disconnect();
  else await Promise.all([connection.pingPool.end(), closePostgresQueueStore(connection.store)]);
}

function asQueueConnection(connection: RedisClient | QueueConnection): QueueConnection {
  return connection instanceof Redis || connection instanceof Cluster ? { backend: 'redis', redis: connection } : connection;
}

export function createEventQueue(connection: RedisClient | QueueConnection, prefix: string, name: string = EVENT_QUEUE_NAME): EventQueue {
  const store = asQueueConnection(connection);
  const queue: EventQueue =
    store.backend === 'redis'
      ? new Queue<EventJobData>(name, { connection: store.redis, prefix, defaultJobOptions: EVENT_JOB_OPTIONS })
      : new PostgresEventQueue(store.store, name);
  queue.on('error', () => {});
  return queue;
}

/** A worker on one event queue, on either store. */
export function createEventQueueWorker<R>(connection: QueueConnection, name: string, processor: EventJobProcessor<R>, options: EventQueueWorkerOptions): EventQueueWorker {
  if (connection.backend === 'redis') return new Worker<EventJobData, R>(name, processor, { ...options, connection: connection.redis });
  return new PostgresQueueWorker<R>(connection.store, name, processor, { concurrency: options.concurrency, autorun: options.autorun ?? true });
}

/** A BullMQ Queue (Redis), for what only BullMQ has (Bull Board); undefined on Postgres. */
export function bullQueueOf(queue: EventQueue): Queue<EventJobData> | undefined {
  return queue instanceof Queue ? (queue as Queue<EventJobData>) : undefined;
}

/**
 * The shard of an event: its key's digest modulo the shard count. Every job of one event (its
 * dispatch, each run's attempts) goes to the same shard, whoever enqueues it (ingest, a
 * worker's retry, the reconciler, a re-drive).
 */
export function shardOf(job: Pick<EventJobData, 'source' | 'eventId'>, shards: number): number {
  if (shards <= 1) return 0;
  // mutant: shard-ignores-key
  return Number.parseInt(eventKeyDigest(job.source, job.eventId).slice(0, 8), 16) % shards;
}

/** The event queues of an installation: one per shard, and the router between them. */
export class EventQueues {
  constructor(readonly shards: readonly EventQueue[]) {
    if (shards.length === 0) throw new Error('EventQueues needs at least one queue');
  }

  /** The queue an event's jobs go to. */
  forJob(job: Pick<EventJobData, 'source' | 'eventId'>): EventQueue {
    return this.shards[shardOf(job, this.shards.length)]!;
  }

  async close(): Promise<void> {
    await Promise.all(this.shards.map((queue) => queue.close()));
  }
}

export function createEventQueues(connection: RedisClient | QueueConnection, prefix: string, shards: number): EventQueues {
  return new EventQueues(eventQueueNames(shards).map((name) => createEventQueue(connection, prefix, name)));
}

/** Where jobs go: one queue, or a sharded set (routed by event key). */
export type JobTarget = EventQueue | EventQueues;

/** The queues behind a target (Bull Board, metrics). */
export function queuesOf(target: JobTarget): readonly EventQueue[] {
  return target instanceof EventQueues ? target.shards : [target];
}

function queueFor(target: JobTarget, job: Pick<EventJobData, 'source' | 'eventId'>): EventQueue {
  return target instanceof EventQueues ? target.forJob(job) : target;
}

export interface EnqueueOptions {
  /**
   * Recovery mode (reconciler): if a finished job with this id is still kept in Redis, it
   * would swallow the add; remove it first. A waiting, delayed or active job is left alone
   * (the event is already queued). Ingest leaves this off: its add is a best-effort nudge.
   */
  replaceFinished?: boolean;
  /** Run no earlier than this many ms from now (retry backoff). */
  delayMs?: number;
  /** BullMQ priority (1 first): a run of a lower-priority handler (flow-control.ts). */
  priority?: number;
  /** At the head of the waiting jobs (BullMQ `lifo`): a wake-up for a freed concurrency slot. */
  lifo?: boolean;
}

/**
 * Insert on claim (QUEUE_BACKEND=postgres; postgres-queue.ts ClaimJobs): the dispatch jobs of a
 * claim batch's events, routed and named as enqueueNewEvents would, for the claim statement to
 * insert with the events (`jobs` is called only here). Undefined on Redis (the relay adds them after the commit), and when
 * the queue's table cannot be made ready now (the same: the relay, then the reconciler).
 */
export async function claimJobsFor(target: JobTarget, jobs: () => Omit<EventJobData, 'rowId'>[]): Promise<ClaimJobs | undefined> {
  const first = queuesOf(target)[0];
  if (!(first instanceof PostgresEventQueue)) return undefined;
  // mutant: claim-jobs-unready-fails
  return claimJobsOn(
    first.store,
    jobs().map((data) => ({ id: jobIdFor(data), queue: queueFor(target, data).name, data })),
  ).catch(() => undefined);
}

/**
 * Adds the first jobs of many new events in one Redis round trip (ingest's group commit). The
 * queue's default job options apply, as for enqueueEvent.
 */
export async function enqueueNewEvents(target: JobTarget, items: EventJobData[]): Promise<void> {
  if (items.length === 0) return;
  // One addBulk per shard, side by side.
  const byQueue = new Map<EventQueue, EventJobData[]>();
  for (const item of items) {
    const queue = queueFor(target, item);
    const list = byQueue.get(queue);
    if (list) list.push(item);
    else byQueue.set(queue, [item]);
  }
  await Promise.all([...byQueue].map(([queue, list]) => queue.addBulk(list.map((data) => ({ name: EVENT_JOB_NAME, data, opts: { jobId: jobIdFor(data) } })))));
}

/** Adds a dispatch job, or a run's job for its next attempt. Idempotent per job id while the job exists. */
export async function enqueueEvent(target: JobTarget, data: EventJobData, options: EnqueueOptions = {}): Promise<void> {
  const queue = queueFor(target, data);
  const jobId = jobIdFor(data);
  if (options.replaceFinished) {
    const existing = await queue.getJob(jobId);
    if (existing) {
      const state = await existing.getState();
      if (state === 'completed' || state === 'failed') await existing.remove().catch(() => {});
    }
  }
  await queue.add(EVENT_JOB_NAME, data, {
    jobId,
    ...(options.delayMs ? { delay: options.delayMs } : {}),
    ...(options.priority ? { priority: options.priority } : {}),
    ...(options.lifo ? { lifo: true } : {}),
  });
}
