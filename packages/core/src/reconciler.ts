/**
 * The reconciler: makes Postgres and the queue agree again after either side lost something.
 * One leader at a time (a transaction-scoped advisory lock: lock-keys.ts) takes back expired
 * leases, re-enqueues what was received and never picked up, wakes waits whose wake-up was lost,
 * ages lower-priority runs, and opens or closes failure groups; jobs are enqueued only after its
 * transaction commits. Every process refreshes its gauges after a pass. Each step and why:
 * docs/architecture.md, "The reconciler". `runOnce()` for tests, `run()` for the loop.
 */
import { TimeoutError, withTimeout, withTransaction, type Logger, type Pool, type WorkerMetrics } from '@oncehook/shared';
import { advisoryLockKey } from './lock-keys.js';
import type { EventJobData } from './vocabulary.js';
import { enqueueEvent, queuesOf, type JobTarget } from './queue.js';
import type { Queries } from './store/queries.js';
import { createFailureNotifier, logOpened, type FailureNotifier, type FailureNotifySettings } from './failure-groups.js';
import { createEngineEvents, type EngineEvents } from './engine-events.js';
import { sampleBacklog } from './activity.js';

/**
 * Longest wait for one Redis step of a pass (an add, the queue gauges). A Redis that stops
 * answering without closing the connection (a stopped process, a partition, a cluster node
 * mid-failover) leaves a command pending forever: unbounded, that one await would stop
 * every later pass, and with them every recovery, silently. 5 s covers a failover's few
 * seconds; past it the pass gives up on Redis and the next one retries.
 */
export const RECONCILER_REDIS_TIMEOUT_MS = 5_000;

export interface ReconcilerSettings {
  intervalMs: number;
  requeueAfterMs: number;
  batchSize: number;
  /** The leader samples the backlog for the Activity page at each pass (and prunes old minutes). */
  sampleActivity?: boolean;
}

export interface ReconcileCounts {
  /** False when another process held the leadership lock: this pass did nothing. */
  leader: boolean;
  /** Runs with an expired lease, released and re-enqueued. */
  reclaimed: number;
  /** Received runs, and received (never dispatched) events, re-enqueued. */
  requeued: number;
  /** Enqueues that failed (Redis down); retried by a later pass. */
  enqueueFailed: number;
}

export interface Reconciler {
  runOnce(): Promise<ReconcileCounts>;
  /** Sends failure group notifications apart from the passes (FAILURE_NOTIFY_URL); a pass this process led wakes it. */
  readonly notifier: FailureNotifier | undefined;
  /** Where each pass this process led is reported (`reconciler:led`): the engine's events, when given. */
  readonly events: EngineEvents;
  run(): void;
  stop(): Promise<void>;
}

export interface ReconcilerDeps {
  pool: Pool;
  queries: Queries;
  queue: JobTarget;
  log: Logger;
  settings: ReconcilerSettings;
  /** The gauges a pass refreshes (counters listen on `events`: worker-metrics.ts). */
  metrics?: WorkerMetrics;
  /** The engine's events, where a pass this process led is reported; a fresh one when absent. */
  events?: EngineEvents;
  /** Run after a pass this process led, at most once per intervalMs. */
  retention?: { runOnce(): Promise<unknown>; intervalMs: number };
  /** RECONCILER_REDIS_TIMEOUT_MS unless a test shortens it. */
  redisTimeoutMs?: number;
  /** The loaded handlers below the best priority (their runs age to the front after agingMs). */
  lowerPriority?: { handlers: string[]; agingMs: number };
  /** Where an opened failure group is notified (FAILURE_NOTIFY_URL); absent: counted and logged only. */
  failureNotify?: FailureNotifySettings;
  /** This worker, marked seen at every pass (the admin's handler pages list the workers with each handler). */
  workerId?: string;
}

export function createReconciler(given: ReconcilerDeps): Reconciler {
  const deps = { ...given, redisTimeoutMs: given.redisTimeoutMs ?? RECONCILER_REDIS_TIMEOUT_MS };
  const { log, settings, metrics, retention } = deps;
  const lockKey = advisoryLockKey(deps.queries.schema, 'reconciler');
  let retentionDueAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const events = deps.events ?? createEngineEvents(log);
  const notifier = deps.failureNotify ? createFailureNotifier({ ...deps, notify: deps.failureNotify }) : undefined;
  // Both listen to the passes: the opened groups' log lines, and the notifier's wake (a round
  // sends every due notification, the retries of earlier ones too).
  const unsubscribe = [events.on('reconciler:led', (pass) => logOpened(pass.opened, log)), ...(notifier ? [events.on('reconciler:led', () => notifier.wake())] : [])];

  async function runOnce(): Promise<ReconcileCounts> {
    if (deps.workerId) await deps.queries.workerSeen(deps.pool, deps.workerId).catch((error: unknown) => log.warn({ err: error }, 'could not mark this worker seen'));
    const taken = await takeRecoverable(deps, lockKey);
    metrics?.reconcilerLeader.set(taken ? 1 : 0);
    if (!taken) {
      await refreshGauges(deps).catch((error: unknown) => log.warn({ err: error }, 'queue gauges not refreshed'));
      return { leader: false, reclaimed: 0, requeued: 0, enqueueFailed: 0 };
    }
    const enqueueFailed = await reenqueue(deps, [
      [taken.reclaimed, 'lease expired'],
      [taken.requeued, 'received but not picked up'],
      [taken.aged, 'lower priority, queued past PRIORITY_AGING_MS'],
    ]);
    // Listeners are not awaited: notifications never hold the pass (leases and re-enqueues wait for it).
    // mutant: notify-holds-the-pass
    events.emit('reconciler:led', { reclaimed: taken.reclaimed.length, requeued: taken.requeued.length, opened: taken.opened });
    const counts = { leader: true, reclaimed: taken.reclaimed.length, requeued: taken.requeued.length, enqueueFailed };
    if (counts.reclaimed || counts.requeued || counts.enqueueFailed) log.info(counts, 'reconciler pass');
    await refreshGauges(deps).catch((error: unknown) => log.warn({ err: error }, 'queue gauges not refreshed'));
    await deps.queries.forgetWorkers(deps.pool, null).catch((error: unknown) => log.warn({ err: error }, 'workers unseen for a day not forgotten'));
    if (settings.sampleActivity) await sampleBacklog(deps.pool, deps.queries).catch((error: unknown) => log.warn({ err: error }, 'backlog not sampled for the activity pictures'));
    if (retention && Date.now() >= retentionDueAt) {
      retentionDueAt = Date.now() + retention.intervalMs;
      await retention.runOnce().catch((error: unknown) => log.error({ err: error }, 'retention run failed; retrying next interval'));
    }
    return counts;
  }

  function schedule() {
    if (stopped) return;
    timer = setTimeout(() => {
      running = runOnce()
        .catch((error: unknown) => log.error({ err: error }, 'reconciler pass failed; retrying next interval'))
        .finally(schedule);
    }, settings.intervalMs);
  }

  return {
    runOnce,
    notifier,
    events,
    run: schedule,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
      for (const stop of unsubscribe) stop();
      await notifier?.stop();
    },
  };
}

/**
 * One leader at a time (a transaction-scoped advisory lock; null when another process leads):
 * takes, in one transaction, the runs whose lease expired, the runs and events received but not
 * picked up, the runs no pause covers any more, the stalled waits, and the lower-priority runs
 * that aged to the front. Their jobs are added after the commit (reenqueue).
 */
async function takeRecoverable({ pool, queries, settings, lowerPriority }: ReconcilerDeps, lockKey: string) {
  return withTransaction(pool, async (tx) => {
    const { rows } = await tx.query<{ leader: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS leader', [lockKey]);
    if (!rows[0]?.leader) return null;
    const reclaimed = await queries.releaseExpiredLeases(tx, settings.batchSize);
    const requeued = [
      ...(await queries.takeStaleReceivedRuns(tx, settings.requeueAfterMs, settings.batchSize)),
      ...(await queries.takeStaleReceivedEvents(tx, settings.requeueAfterMs, settings.batchSize)),
      ...(await queries.releasePaused(tx, settings.batchSize)),
      ...(await queries.wakeStalled(tx, settings.requeueAfterMs, settings.batchSize)),
    ];
    const aged = lowerPriority ? await queries.agedRuns(tx, lowerPriority.handlers, lowerPriority.agingMs, settings.batchSize) : [];
    const opened = await queries.openFailureGroups(tx);
    return { reclaimed, requeued, aged, opened };
  });
}

/**
 * Adds the taken rows' jobs; returns how many could not be added (a later pass takes them
 * again). After an add that timed out, Redis is not answering: the rest of this pass's adds are
 * not tried (each would wait as long).
 */
async function reenqueue(deps: ReconcilerDeps & { redisTimeoutMs: number }, groups: [EventJobData[], string][]): Promise<number> {
  const { queue, log, redisTimeoutMs } = deps;
  let enqueueFailed = 0;
  let redisSilent = false;
  for (const [jobs, why] of groups) {
    for (const job of jobs) {
      if (redisSilent) {
        enqueueFailed += 1;
        continue;
      }
      try {
        // mutant: reconciler-waits-on-silent-redis
        await withTimeout(enqueueEvent(queue, job, { replaceFinished: true }), redisTimeoutMs, 're-enqueue');
        log.info({ rowId: job.rowId, source: job.source, eventId: job.eventId, handler: job.handler }, `re-enqueued (${why})`);
      } catch (error) {
        enqueueFailed += 1;
        if (error instanceof TimeoutError) redisSilent = true;
        log.warn({ err: error, rowId: job.rowId, source: job.source, eventId: job.eventId, handler: job.handler }, 're-enqueue failed; a later pass retries');
      }
    }
  }
  return enqueueFailed;
}

/** The gauges (webhook_events_by_state, _stuck, dead letters, queue depth and age), for this process's /metrics. */
async function refreshGauges(deps: ReconcilerDeps & { redisTimeoutMs: number }): Promise<void> {
  const { pool, queries, queue, settings, metrics, redisTimeoutMs } = deps;
  if (!metrics) return;
  const counts = await queries.pendingCounts(pool, settings.requeueAfterMs);
  metrics.eventsByState.set({ state: 'received' }, counts.eventsReceived);
  metrics.eventsByState.set({ state: 'processing' }, counts.runsProcessing);
  metrics.eventsByState.set({ state: 'failed' }, counts.runsFailed);
  metrics.stuck.set({ kind: 'processing_lease_expired' }, counts.runsProcessingExpired);
  metrics.stuck.set({ kind: 'received_not_picked_up' }, counts.eventsReceivedStale + counts.runsReceivedStale);
  metrics.deadLetters.set(counts.runsFailed);
  // Flow control: what is paused and for how long, what waits and why (reset first: a
  // resumed handler's series goes away instead of staying at its last value).
  const [pauses, waiting, groups] = await Promise.all([queries.listPauses(pool), queries.waitingCounts(pool), queries.failureGroups(pool, { limit: 10_000 })]);
  metrics.failureGroups.reset();
  metrics.failureGroupRuns.reset();
  for (const g of groups) {
    metrics.failureGroups.inc({ handler: g.handler });
    metrics.failureGroupRuns.inc({ handler: g.handler }, g.failed + g.retrying);
  }
  metrics.paused.reset();
  metrics.pausedSeconds.reset();
  for (const p of pauses) {
    metrics.paused.set({ scope: p.scope, name: p.name, by: p.actor === 'circuit-breaker' ? 'circuit-breaker' : 'operator' }, 1);
    metrics.pausedSeconds.set({ scope: p.scope, name: p.name }, Math.max(0, (Date.now() - new Date(p.pausedAt).getTime()) / 1000));
  }
  metrics.runsWaiting.reset();
  for (const w of waiting) metrics.runsWaiting.set({ handler: w.handler, reason: w.waiting }, w.n);
  // Summed over the shards; the oldest waiting job of any shard.
  const totals: Record<string, number> = { waiting: 0, active: 0, delayed: 0, failed: 0, completed: 0 };
  let oldestAt = Number.POSITIVE_INFINITY;
  for (const shard of queuesOf(queue)) {
    const jobs = await withTimeout(shard.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed'), redisTimeoutMs, 'queue counts');
    for (const [state, n] of Object.entries(jobs)) totals[state] = (totals[state] ?? 0) + n;
    const [oldest] = await withTimeout(shard.getJobs(['waiting'], 0, 0, true), redisTimeoutMs, 'oldest waiting job');
    if (oldest) oldestAt = Math.min(oldestAt, oldest.timestamp);
  }
  for (const [state, n] of Object.entries(totals)) metrics.queueJobs.set({ state }, n);
  metrics.oldestWaitingSeconds.set(Number.isFinite(oldestAt) ? Math.max(0, (Date.now() - oldestAt) / 1000) : 0);
}
