/**
 * One worker process: a BullMQ Worker that runs processEvent for each job, plus the
 * reconciler loop. `createEventWorker(deps)` wires them; `close()` stops taking jobs, waits
 * for the ones in flight, and stops the reconciler.
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { enqueueEvent, EVENT_QUEUE_NAME, type EventJobData, type Faults, type Logger, type Pool, type WorkerMetrics } from '@oncehook/shared';
import type { Queue } from 'bullmq';
import type { HandlerRegistry } from './handlers';
import { processEvent, type ProcessOutcome } from './process-event';
import { createReconciler, type Reconciler, type ReconcilerSettings } from './reconciler';
import { createRetention, type RetentionSettings } from './retention';

export interface WorkerSettings {
  /** Retention of done events; off when absent (tests that do not need it). */
  retention?: RetentionSettings & { intervalMs: number };
  concurrency: number;
  leaseMs: number;
  maxAttempts: number;
  retryBackoffMs: number;
  queuePrefix: string;
  reconciler: ReconcilerSettings;
}

export interface EventWorkerDeps {
  pool: Pool;
  /** Blocking connection for the BullMQ Worker (maxRetriesPerRequest: null). */
  connection: Redis;
  /** Producer queue the reconciler re-enqueues into. */
  queue: Queue<EventJobData>;
  registry: HandlerRegistry;
  log: Logger;
  faults: Faults;
  settings: WorkerSettings;
  metrics?: WorkerMetrics;
}

export interface EventWorker {
  worker: Worker<EventJobData, ProcessOutcome['kind']>;
  reconciler: Reconciler;
  close(): Promise<void>;
}

/** Exponential backoff with jitter, capped at 10 minutes: after failed attempt n, wait ~base * 2^(n-1). */
export function retryDelayMs(failedAttempt: number, baseMs: number): number {
  const exponential = Math.min(baseMs * 2 ** Math.max(0, failedAttempt - 1), 10 * 60_000);
  return Math.round(exponential * (0.5 + Math.random() * 0.5));
}

export function createEventWorker(deps: EventWorkerDeps, options: { autorun?: boolean } = {}): EventWorker {
  const { settings, log } = deps;
  const processDeps = { pool: deps.pool, registry: deps.registry, log, faults: deps.faults, settings };

  const worker = new Worker<EventJobData, ProcessOutcome['kind']>(
    EVENT_QUEUE_NAME,
    async (job) => {
      const started = process.hrtime.bigint();
      const outcome = await processEvent(processDeps, job.data);
      if (deps.metrics && outcome.kind !== 'skipped') {
        const labels = { provider: job.data.provider, type: outcome.type, outcome: outcome.kind };
        deps.metrics.processingDuration.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
        deps.metrics.processedTotal.inc(labels);
      }
      if (outcome.kind === 'retry') {
        // The failure is recorded on the row (state received). The next attempt is a job of
        // its own (jobIdFor(..., attempt)), delayed by the backoff. If this add is lost, the
        // reconciler re-enqueues the row after REQUEUE_AFTER_MS.
        const delayMs = retryDelayMs(outcome.attempt, settings.retryBackoffMs);
        await enqueueEvent(deps.queue, { ...job.data, attempt: outcome.attempt }, { delayMs }).catch((error: unknown) =>
          log.warn({ err: error, rowId: outcome.rowId }, 'could not schedule the retry; the reconciler will re-enqueue it'),
        );
      }
      return outcome.kind;
    },
    {
      connection: deps.connection,
      prefix: settings.queuePrefix,
      concurrency: settings.concurrency,
      autorun: options.autorun ?? true,
      // BullMQ's job lock is its own lease on the job. Tied to ours: when a worker dies, its
      // active jobs are declared stalled and re-run about when its event leases expire,
      // instead of after BullMQ's 30 s default (a stalled job still holds its job id, which
      // blocks the reconciler's re-enqueue of an event that was never claimed).
      lockDuration: settings.leaseMs,
      stalledInterval: settings.leaseMs,
      maxStalledCount: 2,
    },
  );
  // A job that errors is already logged with its event; connection errors are retried by
  // ioredis. Listening keeps either from becoming an unhandled 'error' event.
  worker.on('error', (error) => log.warn({ err: error }, 'queue worker error'));

  const retention = settings.retention
    ? { ...createRetention({ pool: deps.pool, log: log.child({ component: 'retention' }), settings: settings.retention }), intervalMs: settings.retention.intervalMs }
    : undefined;
  const reconciler = createReconciler({ pool: deps.pool, queue: deps.queue, log: log.child({ component: 'reconciler' }), settings: settings.reconciler, metrics: deps.metrics, retention });

  return {
    worker,
    reconciler,
    async close() {
      await reconciler.stop();
      await worker.close();
    },
  };
}
