/**
 * The queue contract between ingest, the reconciler and the workers.
 *
 * Redis is a delivery mechanism, not a record: Postgres holds every event, and the worker's
 * guarded claims (dispatchAndLease, acquireRun) are what really prevent double processing. The jobId derived
 * from the event key only saves work: while a job with that id exists, adding it again is a
 * no-op in BullMQ. Once a job is removed (completed and cleaned, or Redis lost it) the same
 * id can be added again, which is exactly what recovery needs.
 */
import { createPostgresBackend, Queue, Worker, type PostgresPoolConfig, type Processor, type WorkerOptions } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { StartupError, TimeoutError } from '@oncehook/shared';
import { EVENT_QUEUE_NAME, eventQueueNames, queueKey } from './queue-names.js';
import { eventKeyDigest } from './event-key.js';
import type { EventJobData } from './vocabulary.js';

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

/**
 * The job options on BullMQ's Postgres backend (QUEUE_BACKEND=postgres): a completed job is
 * deleted at once. Its count/age retention (`removeOnComplete: { count }`) runs, in every
 * completing transaction, a DELETE of the completed jobs beyond the newest N; under a worker's
 * concurrency those DELETEs lock the same rows in different orders and Postgres aborts them
 * as deadlocks (`npm run bench -- --queue-backends postgres`: 10 deadlocks in a 10,000-job
 * no-op run at concurrency 32; a job whose completion is aborted stays active until its lock
 * expires and runs again). Deleting only its own row takes no other job's lock. Completed
 * jobs are then not listed in Bull Board; the events view has every event's history.
 * Failed jobs (dead letters, rare) keep the Redis retention.
 */
// mutant: pg-queue-count-retention
export const POSTGRES_EVENT_JOB_OPTIONS = { ...EVENT_JOB_OPTIONS, removeOnComplete: true } as const;

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
 * The queue store of one process: Redis (the default), or Postgres through BullMQ's own
 * PostgreSQL backend (QUEUE_BACKEND=postgres, Postgres alone; docs/architecture.md). Queues
 * and workers are built from it, so nothing else knows which one it is.
 */
export type QueueConnection =
  | { readonly backend: 'redis'; readonly redis: RedisClient }
  | {
      readonly backend: 'postgres';
      /** BullMQ's pool config: each Queue and Worker builds its own pool and LISTEN client from it. */
      readonly options: PostgresPoolConfig;
      /** A one-connection pool of our own, for readiness pings. */
      readonly pingPool: pg.Pool;
    };

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
 * Opens the queue store of a process. On Postgres, BullMQ's migrations run on first connect
 * (under BullMQ's own advisory lock, so processes starting together migrate once).
 */
export function openQueueConnection(settings: QueueConnectionSettings, role: RedisRole, options: { poolSize?: number } = {}): QueueConnection {
  // mutant: pg-queue-ignored
  if (settings.QUEUE_BACKEND === 'redis') return { backend: 'redis', redis: createRedisClient(settings, role) };
  const pingPool = new pg.Pool({ connectionString: settings.DATABASE_URL, max: 1, connectionTimeoutMillis: 2_000, application_name: 'oncehook-queue-ping' });
  pingPool.on('error', () => {});
  return {
    backend: 'postgres',
    options: {
      connectionString: settings.DATABASE_URL,
      schema: queueSchemaFor(settings.QUEUE_PREFIX),
      migrate: true,
      max: options.poolSize ?? 4,
      application_name: `oncehook-queue-${role}`,
      // The LISTEN connection is long-lived: keepalive lets a dropped one be noticed.
      keepAlive: true,
    },
    pingPool,
  };
}

/**
 * Readiness: the queue's store can take a job on every shard, not just answer PING. On Redis,
 * one write per queue, to a key of that queue's own (`<prefix>:<queue>:oncehook-ready`, in the
 * queue's hash slot, expiring after a minute): it fails where an add would, with MOVED (a
 * plain client on one node of a cluster), CLUSTERDOWN, READONLY (a replica) or OOM. The error
 * says what to do (readinessProblem). On Postgres, the pool answers.
 */
export async function pingQueue(connection: QueueConnection, prefix: string, names: readonly string[]): Promise<unknown> {
  if (connection.backend === 'postgres') return connection.pingPool.query('SELECT 1');
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
  else await connection.pingPool.end();
}

/**
 * BullMQ's Postgres backend, with an error path on every connection it checks out. pg's pool
 * listens for errors only on IDLE clients; BullMQ's owned pool adds no listener of its own to a
 * client it has checked out. A connection lost while checked out between two statements (a
 * Postgres shutting down: `57P01`, then `57P03` on the reconnect; a failover) then emits
 * 'error' with nobody listening, and that kills the process. With this listener the client's
 * next statement fails instead, and BullMQ's own error handling applies (the job is retried, the
 * worker loop reconnects). The same guard as createPool's (packages/shared/src/db/pool.ts).
 */
const guardedPostgresBackend: typeof createPostgresBackend = (name, opts, factoryOpts) => {
  const backend = createPostgresBackend(name, opts, factoryOpts);
  // The backend's connection and its pg pool: created now, connected lazily, so every client the
  // pool will ever hand out passes through this listener.
  const pool = (backend as unknown as { connection?: { pool?: pg.Pool } }).connection?.pool;
  pool?.on('connect', (client) => {
    client.on('error', () => {});
  });
  return backend;
};

function asQueueConnection(connection: RedisClient | QueueConnection): QueueConnection {
  return connection instanceof Redis || connection instanceof Cluster ? { backend: 'redis', redis: connection } : connection;
}

export function createEventQueue(connection: RedisClient | QueueConnection, prefix: string, name: string = EVENT_QUEUE_NAME): Queue<EventJobData> {
  const store = asQueueConnection(connection);
  const queue =
    store.backend === 'redis'
      ? new Queue<EventJobData>(name, { connection: store.redis, prefix, defaultJobOptions: EVENT_JOB_OPTIONS })
      : // The Postgres-backed Queue has the same methods (add, addBulk, getJob, counts, close);
        // only its type parameters differ, so it is used as the one Queue type of the code base.
        (new Queue(name, { connection: store.options, defaultJobOptions: POSTGRES_EVENT_JOB_OPTIONS }, guardedPostgresBackend) as unknown as Queue<EventJobData>);
  queue.on('error', () => {});
  return queue;
}

/** A BullMQ Worker on one event queue, on either store. */
export function createEventQueueWorker<R>(
  connection: QueueConnection,
  name: string,
  processor: Processor<EventJobData, R>,
  options: Omit<WorkerOptions, 'connection'>,
): Worker<EventJobData, R> {
  if (connection.backend === 'redis') return new Worker<EventJobData, R>(name, processor, { ...options, connection: connection.redis });
  const { prefix: _ignored, ...rest } = options;
  return new Worker(name, processor as Processor, { ...rest, connection: connection.options }, guardedPostgresBackend) as unknown as Worker<EventJobData, R>;
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
  constructor(readonly shards: readonly Queue<EventJobData>[]) {
    if (shards.length === 0) throw new Error('EventQueues needs at least one queue');
  }

  /** The queue an event's jobs go to. */
  forJob(job: Pick<EventJobData, 'source' | 'eventId'>): Queue<EventJobData> {
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
export type JobTarget = Queue<EventJobData> | EventQueues;

/** The queues behind a target (Bull Board, metrics). */
export function queuesOf(target: JobTarget): readonly Queue<EventJobData>[] {
  return target instanceof EventQueues ? target.shards : [target];
}

function queueFor(target: JobTarget, job: Pick<EventJobData, 'source' | 'eventId'>): Queue<EventJobData> {
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
 * Adds the first jobs of many new events in one Redis round trip (ingest's group commit). The
 * queue's default job options apply, as for enqueueEvent.
 */
export async function enqueueNewEvents(target: JobTarget, items: EventJobData[]): Promise<void> {
  if (items.length === 0) return;
  // One addBulk per shard, side by side.
  const byQueue = new Map<Queue<EventJobData>, EventJobData[]>();
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
