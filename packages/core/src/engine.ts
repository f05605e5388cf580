/**
 * createEngine(options): the engine, assembled. The one place its parts are put together: the
 * worker process (oncehook's build-worker.ts, through event-worker.ts), the test kit's
 * checkHandler and the repository's tests all build it here, so none can drift from another.
 *
 *   const engine = createEngine({ pool, schema: 'oncehook', handlers, log, settings });
 *   await engine.processJob(job);   // one job: a dispatch, or one handler's run
 *
 * The engine is also the state machine's dependencies (ProcessDeps), so `processJob(engine, job)`
 * is the same call, except that only `engine.processJob` reports each run on `engine.events`
 * (`run:ended`, `run:waiting`: engine-events.ts), where metrics and probes listen.
 */
import type { Handler } from '@oncehook/sdk';
import { noFaults, type Faults, type Logger, type Pool } from '@oncehook/shared';
import type { EventJobData } from './vocabulary.js';
import { createEngineEvents, type EngineEvents } from './engine-events.js';
import { processJob, runHandedOver, type HandedOverRun, type JobOptions, type JobOutcome, type ProcessDeps, type ProcessSettings } from './process-event.js';
import { HandlerRegistry } from './registry.js';
import { createDispatchBatcher } from './dispatch-batcher.js';
import { createRunBatchers } from './run-batchers.js';
import { createQueries } from './store/queries.js';

/**
 * The engine's defaults, the one place each is decided: the worker's configuration
 * (LEASE_MS, MAX_ATTEMPTS, RETRY_BACKOFF_MS, UNHANDLED_EVENTS in the `oncehook` package's
 * config.ts) takes them from here.
 * - leaseMs 30 s: a running handler renews its lease every third of it, so it only expires
 *   when the worker died or hung; it bounds how long a crashed worker's run waits before
 *   another worker takes it over.
 * - maxAttempts 10, backoffMs 2 s (doubling, jittered, capped at 10 minutes): 10 attempts span
 *   roughly 9-17 minutes, long enough to ride out a downstream outage of a few minutes, short
 *   enough that a real bug reaches a human within the hour.
 * - unhandled `done`: an event type no handler is registered for is recorded with a note, so
 *   one you do not care about never piles up as a dead letter (`fail` makes it one).
 */
export const DEFAULT_ENGINE_SETTINGS = {
  leaseMs: 30_000,
  retry: { maxAttempts: 10, backoffMs: 2_000 },
  unhandled: 'done',
} as const satisfies ProcessSettings;

export interface EngineOptions {
  pool: Pool;
  /** Postgres schema of Oncehook's tables (ONCEHOOK_SCHEMA). */
  schema: string;
  /** The handlers this engine runs, or a registry of them. */
  handlers: readonly Handler[] | HandlerRegistry;
  log: Logger;
  /** Any subset; the rest from DEFAULT_ENGINE_SETTINGS. */
  settings?: Partial<ProcessSettings>;
  faults?: Faults;
  /** Where the engine reports what happens (engine-events.ts); a fresh one when absent. */
  events?: EngineEvents;
}

export interface Engine extends ProcessDeps {
  /** Runs one job through the state machine (processJob). */
  processJob(job: EventJobData, options?: JobOptions): Promise<JobOutcome>;
  /** Runs a woken run leased in its wake-up (a follow-up's `handedOver`, asked for with `leaseWakeUp`). */
  runHandedOver(handedOver: HandedOverRun, options?: JobOptions): Promise<JobOutcome>;
}

export function createEngine(options: EngineOptions): Engine {
  const queries = createQueries(options.schema);
  const settings = { ...DEFAULT_ENGINE_SETTINGS, ...options.settings };
  const events = options.events ?? createEngineEvents(options.log);
  const deps: ProcessDeps = {
    pool: options.pool,
    queries,
    registry: options.handlers instanceof HandlerRegistry ? options.handlers : new HandlerRegistry(options.handlers),
    dispatcher: createDispatchBatcher({
      pool: options.pool,
      queries,
      leaseMs: settings.leaseMs,
      onBatch: (size) => events.emit('dispatch:batch', { events: size }),
    }),
    batched: createRunBatchers({ pool: options.pool, queries, onBatch: (statement, runs) => events.emit('runs:batch', { statement, runs }) }),
    log: options.log,
    faults: options.faults ?? noFaults,
    settings,
    events,
  };
  return {
    ...deps,
    async processJob(job, options) {
      const started = process.hrtime.bigint();
      const outcome = await processJob(deps, job, options);
      if (outcome.kind === 'runs') reportRuns(events, outcome, Number(process.hrtime.bigint() - started) / 1e9);
      return outcome;
    },
    async runHandedOver(handedOver, options) {
      const started = process.hrtime.bigint();
      const outcome = await runHandedOver(deps, handedOver, options);
      if (outcome.kind === 'runs') reportRuns(events, outcome, Number(process.hrtime.bigint() - started) / 1e9);
      return outcome;
    },
  };
}

/** Each run of a job on the events: an attempt that ended, or a run that waits. */
function reportRuns(events: EngineEvents, outcome: Extract<JobOutcome, { kind: 'runs' }>, seconds: number): void {
  for (const run of outcome.runs) {
    if (run.kind === 'skipped' || run.kind === 'deferred') continue;
    if (run.kind === 'waiting') events.emit('run:waiting', { source: outcome.source, handler: run.handler, reason: run.reason });
    else events.emit('run:ended', { source: outcome.source, type: run.type, handler: run.handler, outcome: run.kind, seconds });
  }
}
