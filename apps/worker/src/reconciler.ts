/**
 * The reconciler: makes Postgres and Redis agree again after either side lost something.
 *
 * Each pass (one leader at a time across all worker processes):
 *   1. processing rows whose lease expired (worker killed or hung) -> received (fences the
 *      old holder out), then re-enqueued;
 *   2. received rows untouched for REQUEUE_AFTER_MS (Redis flushed or failed over, ingest
 *      died between commit and enqueue) -> re-enqueued.
 *
 * Leadership: the pass runs its UPDATEs in one transaction that first takes
 * pg_try_advisory_xact_lock; a process that does not get it skips the pass. No long-lived
 * leader connection to lose, and no two passes at once. Jobs are enqueued only after that
 * transaction commits; a failed enqueue is retried by a later pass.
 *
 * After every pass (leader or not) it refreshes this process's gauges (metrics.ts).
 *
 * `runOnce()` for tests (returns the counts), `run()` for the loop, `stop()` to end it.
 */
import { enqueueEvent, queries, withTransaction, type EventJobData, type EventRef, type Logger, type Pool, type WorkerMetrics } from '@oncehook/shared';
import type { Queue } from 'bullmq';

/** Arbitrary constant shared by every worker process: the reconciler's leadership lock. */
export const RECONCILER_LOCK_KEY = 7_245_002;

export interface ReconcilerSettings {
  intervalMs: number;
  requeueAfterMs: number;
  batchSize: number;
}

export interface ReconcileCounts {
  /** False when another process held the leadership lock: this pass did nothing. */
  leader: boolean;
  /** processing rows with an expired lease, released and re-enqueued. */
  reclaimed: number;
  /** received rows re-enqueued. */
  requeued: number;
  /** Rows whose enqueue failed (Redis down); retried by a later pass. */
  enqueueFailed: number;
}

export interface Reconciler {
  runOnce(): Promise<ReconcileCounts>;
  run(): void;
  stop(): Promise<void>;
}

export function createReconciler(deps: {
  pool: Pool;
  queue: Queue<EventJobData>;
  log: Logger;
  settings: ReconcilerSettings;
  metrics?: WorkerMetrics;
  /** Run after a pass this process led, at most once per intervalMs. */
  retention?: { runOnce(): Promise<unknown>; intervalMs: number };
}): Reconciler {
  const { pool, queue, log, settings, metrics, retention } = deps;
  let retentionDueAt = 0;

  /** The gauges (webhook_events_by_state, _stuck, dead letters, queue depth and age), for this process's /metrics. */
  async function refreshGauges(): Promise<void> {
    if (!metrics) return;
    const counts = await queries.pendingCounts(pool, settings.requeueAfterMs);
    metrics.eventsByState.set({ state: 'received' }, counts.received);
    metrics.eventsByState.set({ state: 'processing' }, counts.processing);
    metrics.eventsByState.set({ state: 'failed' }, counts.failed);
    metrics.stuck.set({ kind: 'processing_lease_expired' }, counts.processingExpired);
    metrics.stuck.set({ kind: 'received_not_picked_up' }, counts.receivedStale);
    metrics.deadLetters.set(counts.failed);
    const jobs = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed');
    for (const [state, n] of Object.entries(jobs)) metrics.queueJobs.set({ state }, n);
    const [oldest] = await queue.getJobs(['waiting'], 0, 0, true);
    metrics.oldestWaitingSeconds.set(oldest ? Math.max(0, (Date.now() - oldest.timestamp) / 1000) : 0);
  }
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let stopped = false;

  async function runOnce(): Promise<ReconcileCounts> {
    const taken = await withTransaction(pool, async (tx) => {
      const { rows } = await tx.query<{ leader: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS leader', [RECONCILER_LOCK_KEY]);
      if (!rows[0]?.leader) return null;
      const reclaimed = await queries.releaseExpiredLeases(tx, settings.batchSize);
      const requeued = await queries.takeStaleReceived(tx, settings.requeueAfterMs, settings.batchSize);
      return { reclaimed, requeued };
    });
    metrics?.reconcilerLeader.set(taken ? 1 : 0);
    if (!taken) {
      await refreshGauges();
      return { leader: false, reclaimed: 0, requeued: 0, enqueueFailed: 0 };
    }
    metrics?.recoveriesTotal.inc({ kind: 'reclaimed' }, taken.reclaimed.length);
    metrics?.recoveriesTotal.inc({ kind: 'requeued' }, taken.requeued.length);

    let enqueueFailed = 0;
    const enqueueAll = async (refs: EventRef[], why: string) => {
      for (const ref of refs) {
        try {
          await enqueueEvent(queue, ref, { replaceFinished: true });
          log.info({ rowId: ref.rowId, provider: ref.provider, eventId: ref.eventId }, `re-enqueued (${why})`);
        } catch (error) {
          enqueueFailed += 1;
          log.warn({ err: error, rowId: ref.rowId, provider: ref.provider, eventId: ref.eventId }, 're-enqueue failed; a later pass retries');
        }
      }
    };
    await enqueueAll(taken.reclaimed, 'lease expired');
    await enqueueAll(taken.requeued, 'received but not picked up');
    const counts = { leader: true, reclaimed: taken.reclaimed.length, requeued: taken.requeued.length, enqueueFailed };
    if (counts.reclaimed || counts.requeued || counts.enqueueFailed) log.info(counts, 'reconciler pass');
    await refreshGauges();
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
    run: schedule,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
