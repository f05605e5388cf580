/**
 * One worker process's queue side: a BullMQ Worker that runs processJob for each job, its
 * metrics subscribed to the engine's events (worker-metrics.ts), and schedules the next attempt
 * of a run that will retry.
 * `createEventWorker(deps)` wires it with the reconciler; `close()` stops taking jobs, waits for
 * the ones in flight, and stops the reconciler.
 */
import { UnrecoverableError } from 'bullmq';
import { createEventQueueWorker, enqueueEvent, eventQueueNames, type EventQueueWorker, type QueueConnection, type JobTarget } from './queue.js';
import type { Logger, WorkerMetrics } from '@oncehook/shared';
import { type EventJobData, readJobData } from './vocabulary.js';
import type { Engine } from './engine.js';
import type { FollowUp, JobOutcome, RunOutcome } from './process-event.js';
import { createReconciler, type Reconciler, type ReconcilerSettings } from './reconciler.js';
import { createRetention, type RetentionSettings } from './retention-sweep.js';
import { PRIORITY_AGING_MS, priorityLevel } from './flow-control.js';
import type { FailureNotifySettings } from './failure-groups.js';
import { subscribeWorkerMetrics } from './worker-metrics.js';

export interface WorkerSettings {
  /** Retention of done events; off when absent. */
  retention?: RetentionSettings & { intervalMs: number };
  concurrency: number;
  queuePrefix: string;
  /** QUEUE_SHARDS: how many queues the events are spread over. */
  queueShards: number;
  /** The shards this worker consumes (WORKER_QUEUE_SHARDS); empty = all. */
  consumeShards: number[];
  reconciler: ReconcilerSettings;
  /** FAILURE_NOTIFY_URL and its secret: where the reconciler notifies an opened failure group. */
  failureNotify?: FailureNotifySettings;
  /** This process among the workers: its reconciler passes mark it seen with the handlers it loaded. */
  workerId?: string;
}

export interface EventWorkerDeps {
  /** The engine the jobs run through (createEngine): its lease and retry policy drive this loop. */
  engine: Engine;
  /** The queue store the BullMQ Workers consume (on Redis a blocking connection, maxRetriesPerRequest: null). */
  connection: QueueConnection;
  /** Producer queue(s) for retries and the reconciler's re-enqueues (routed by event key when sharded). */
  queue: JobTarget;
  settings: WorkerSettings;
  metrics?: WorkerMetrics;
  log: Logger;
}

export interface EventWorker {
  /** One queue worker per consumed shard (one when QUEUE_SHARDS=1): BullMQ's on Redis, PostgresQueueWorker on Postgres. */
  workers: EventQueueWorker[];
  reconciler: Reconciler;
  close(): Promise<void>;
}

export function createEventWorker(deps: EventWorkerDeps, options: { autorun?: boolean } = {}): EventWorker {
  const { settings, log } = deps;
  const { leaseMs } = deps.engine.settings;
  let closing = false;
  const processor = jobProcessor(deps, () => closing);
  const names = eventQueueNames(settings.queueShards);
  // mutant: worker-consumes-all-shards
  const consumed = settings.consumeShards.length > 0 ? settings.consumeShards : names.map((_, i) => i);
  const workers = consumed.map((shard) =>
    createEventQueueWorker<JobOutcome['kind']>(deps.connection, names[shard]!, processor, {
      prefix: settings.queuePrefix,
      concurrency: settings.concurrency,
      autorun: options.autorun ?? true,
      // BullMQ's job lock is its own lease on the job. Tied to ours: when a worker dies, its
      // active jobs are declared stalled and re-run about when its run leases expire,
      // instead of after BullMQ's 30 s default (a stalled job still holds its job id, which
      // blocks the reconciler's re-enqueue of an event that was never dispatched).
      lockDuration: leaseMs,
      stalledInterval: leaseMs,
      maxStalledCount: 2,
    }),
  );
  // A job that errors is already logged with its event; connection errors are retried by
  // ioredis. Listening keeps either from becoming an unhandled 'error' event.
  for (const worker of workers) worker.on('error', (error) => log.warn({ err: error }, 'queue worker error'));
  const reconciler = workerReconciler(deps);
  const unsubscribe = deps.metrics ? subscribeWorkerMetrics(deps.engine.events, deps.metrics, deps.engine.registry) : () => {};
  return {
    workers,
    reconciler,
    async close() {
      // A job handing freed flow slots over in process stops doing so (the wake-up is enqueued).
      closing = true;
      await reconciler.stop();
      unsubscribe();
      await Promise.all(workers.map((worker) => worker.close()));
    },
  };
}

/**
 * How many woken runs one job runs after its own (jobProcessor): past it, the next wake-up
 * goes through the queue as a job of its own, so no job runs without end and the queue's
 * bookkeeping (Bull Board, stalled checks) sees progress.
 */
export const MAX_RUNS_HANDED_OVER_PER_JOB = 50;

/**
 * One job: the engine's state machine (process-event.ts), then what the job's outcome asks of
 * the queue: a retry's delayed job, flow control's follow-up jobs, and a failed BullMQ job for
 * a dead letter.
 *
 * A limited handler's run that ended freed its slot and woke the run waiting longest for it (a
 * `lifo` follow-up). That run is run HERE, next, in this job's worker slot, instead of being
 * enqueued at the front of the queue and fetched by whichever worker slot frees first: the
 * freed flow slot goes to its waiter without a trip through the queue (issue 66, item 4;
 * docs/flow-control.md). While this job will run the woken run (below the cap, not closing), the
 * wake-up leases it through the slot's gate in the same statement (`leaseWakeUp`: the follow-up
 * carries the lease, and it is run with runHandedOver); it is reported, retried and followed up
 * as its own job would have been. Up to MAX_RUNS_HANDED_OVER_PER_JOB per job, and none once the
 * worker is closing: then the wake-up is not leased and is enqueued as before. A wake-up already
 * leased is always run here (its job would find the run leased and do nothing).
 */
function jobProcessor(deps: EventWorkerDeps, closing: () => boolean): (job: { data: EventJobData }) => Promise<JobOutcome['kind']> {
  const { engine } = deps;
  return async (job) => {
    const data = readJobData(job.data);
    let handedOver = 0;
    /** Whether this job will run the next woken run itself (then its wake-up leases it). */
    // mutant: flow-hand-over-through-queue
    const runsNextHere = () => handedOver < MAX_RUNS_HANDED_OVER_PER_JOB && !closing();
    const outcome = await engine.processJob(data, { leaseWakeUp: runsNextHere() });
    if (outcome.kind === 'unhandled' && outcome.state === 'failed') {
      throw new UnrecoverableError(`dead letter: no handler for ${outcome.source} ${outcome.type} (UNHANDLED_EVENTS=fail)`);
    }
    if (outcome.kind !== 'runs') return outcome.kind;
    let woken = takeWakeUp(outcome);
    const dead = await afterRuns(deps, data, outcome);
    while (woken && (woken.handedOver !== undefined || runsNextHere())) {
      handedOver += 1;
      const wokenJob = woken.job;
      const leased = woken.handedOver;
      let next: JobOutcome;
      try {
        next = leased ? await engine.runHandedOver(leased, { leaseWakeUp: runsNextHere() }) : await engine.processJob(wokenJob, { leaseWakeUp: runsNextHere() });
      } catch (error) {
        // Thrown before a verdict (Postgres unreachable): not this job's failure. The woken run
        // gets its job through the queue, as without the hand-over (one leased here is taken
        // by that job, or by the reconciler, once its lease has run out); if that add fails
        // too, the reconciler finds the run (WAKE_STALLED, or its expired lease).
        deps.log.warn({ err: error, rowId: wokenJob.rowId, handler: wokenJob.handler }, 'the woken run could not be run here; enqueued instead');
        woken = { job: wokenJob, lifo: true };
        break;
      }
      woken = next.kind === 'runs' ? takeWakeUp(next) : undefined;
      // Its retries and follow-ups as its own job's. Its dead letter stays on its run (the
      // Failures page), not on this job: the job is another event's.
      if (next.kind === 'runs') await afterRuns(deps, wokenJob, next);
    }
    if (woken) await enqueueFollowUps(deps, [woken]);
    // A dead letter: the job fails too (no BullMQ retry: UnrecoverableError), so Bull Board
    // lists it under FAILED with the handler's error. The run row is the truth; a re-drive
    // replaces the failed job.
    if (dead.length > 0) throw new UnrecoverableError(dead.map((run) => `dead letter: handler "${run.handler}" failed: ${run.error}`).join('; '));
    return outcome.kind;
  };
}

/**
 * The wake-up a finished limited run made for its slot's longest waiter (handOver in
 * process-event.ts), taken out of the follow-ups: the one leased already first (it must run
 * here), else the first.
 */
function takeWakeUp(outcome: Extract<JobOutcome, { kind: 'runs' }>): FollowUp | undefined {
  const leased = outcome.follow.findIndex((next) => next.handedOver !== undefined);
  const i = leased >= 0 ? leased : outcome.follow.findIndex((next) => next.lifo);
  return i < 0 ? undefined : outcome.follow.splice(i, 1)[0];
}

/** What a job's runs ask of the queue: their retries and follow-up jobs. Returns its dead letters. */
async function afterRuns(deps: EventWorkerDeps, data: EventJobData, outcome: Extract<JobOutcome, { kind: 'runs' }>): Promise<Extract<RunOutcome, { kind: 'failed' }>[]> {
  await scheduleRetries(deps, data, outcome);
  await enqueueFollowUps(deps, outcome.follow);
  return outcome.runs.filter((run) => run.kind === 'failed');
}

/**
 * Flow control's jobs: a waiting run's next look, a wake-up, a lower-priority run. Each carries
 * its run's fence; a lost one is found again by the reconciler.
 */
async function enqueueFollowUps(deps: EventWorkerDeps, follow: readonly FollowUp[]): Promise<void> {
  for (const next of follow) {
    await enqueueEvent(deps.queue, next.job, { delayMs: next.delayMs, priority: next.priority, lifo: next.lifo }).catch((error: unknown) =>
      deps.log.warn({ err: error, rowId: next.job.rowId, handler: next.job.handler }, 'could not schedule a flow-control job; the reconciler will re-enqueue the run'),
    );
  }
}

/** A retry's next attempt, as a delayed job of its own. */
async function scheduleRetries(deps: EventWorkerDeps, data: EventJobData, outcome: Extract<JobOutcome, { kind: 'runs' }>): Promise<void> {
  const { log } = deps;
  for (const run of outcome.runs) {
    if (run.kind === 'retry') {
      // The failure is recorded on the run (state received). The next attempt is a job of
      // its own, delayed by the backoff. If this add is lost, the reconciler re-enqueues
      // the run after REQUEUE_AFTER_MS.
      const next: EventJobData = {
        rowId: data.rowId,
        source: data.source,
        eventId: data.eventId,
        handler: run.handler,
        generation: run.generation,
        attempt: run.attempt,
      };
      await enqueueEvent(deps.queue, next, { delayMs: run.delayMs, priority: run.priority }).catch((error: unknown) =>
        log.warn({ err: error, rowId: next.rowId, handler: run.handler }, 'could not schedule the retry; the reconciler will re-enqueue it'),
      );
    }
  }
}

/** The worker's reconciler, with retention after its passes and the lower-priority handlers' aging. */
function workerReconciler(deps: EventWorkerDeps): Reconciler {
  const { settings, log, metrics, engine } = deps;
  const retention = settings.retention
    ? {
        ...createRetention({ pool: engine.pool, queries: engine.queries, log: log.child({ component: 'retention' }), settings: settings.retention }),
        intervalMs: settings.retention.intervalMs,
      }
    : undefined;
  return createReconciler({
    pool: engine.pool,
    queries: engine.queries,
    queue: deps.queue,
    log: log.child({ component: 'reconciler' }),
    settings: settings.reconciler,
    metrics,
    events: engine.events,
    retention,
    failureNotify: settings.failureNotify,
    workerId: settings.workerId,
    lowerPriority: {
      handlers: engine.registry
        .all()
        .filter((h) => priorityLevel(h) > engine.registry.bestPriorityLevel())
        .map((h) => h.name),
      agingMs: PRIORITY_AGING_MS,
    },
  });
}
