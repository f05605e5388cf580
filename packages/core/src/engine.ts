/**
 * createEngine(options): the engine, assembled. The one place its parts are put together: the
 * worker process (oncehook's build-worker.ts, through event-worker.ts), the test kit's
 * checkHandler and the repository's tests all build it here, so none can drift from another.
 *
 *   const engine = createEngine({ pool, schema: 'oncehook', handlers, log, settings });
 *   await engine.processJob(job);   // one job: a dispatch, or one handler's run
 *
 * The engine is also the state machine's dependencies (ProcessDeps), so `processJob(engine, job)`
 * is the same call.
 */
import type { Handler } from '@oncehook/sdk';
import { noFaults, type Faults, type Logger, type Pool } from '@oncehook/shared';
import type { EventJobData } from './vocabulary.js';
import type { EngineHooks } from './handler-context.js';
import { processJob, type JobOutcome, type ProcessDeps, type ProcessSettings } from './process-event.js';
import { HandlerRegistry } from './registry.js';
import { createDispatchBatcher } from './dispatch-batcher.js';
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
  hooks?: EngineHooks;
  /** Called when an event has no handler (webhook_events_unhandled_total). */
  onUnhandled?: ProcessDeps['onUnhandled'];
  /** Called with the number of events of each dispatch statement (oncehook_dispatch_batch_size). */
  onDispatchBatch?: (size: number) => void;
}

export interface Engine extends ProcessDeps {
  /** Runs one job through the state machine (processJob). */
  processJob(job: EventJobData): Promise<JobOutcome>;
}

export function createEngine(options: EngineOptions): Engine {
  const queries = createQueries(options.schema);
  const settings = { ...DEFAULT_ENGINE_SETTINGS, ...options.settings };
  const deps: ProcessDeps = {
    pool: options.pool,
    queries,
    registry: options.handlers instanceof HandlerRegistry ? options.handlers : new HandlerRegistry(options.handlers),
    dispatcher: createDispatchBatcher({
      pool: options.pool,
      queries,
      leaseMs: settings.leaseMs,
      ...(options.onDispatchBatch ? { onBatch: options.onDispatchBatch } : {}),
    }),
    log: options.log,
    faults: options.faults ?? noFaults,
    settings,
    ...(options.hooks ? { hooks: options.hooks } : {}),
    ...(options.onUnhandled ? { onUnhandled: options.onUnhandled } : {}),
  };
  return { ...deps, processJob: (job) => processJob(deps, job) };
}
