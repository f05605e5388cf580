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
import { noFaults, WORKER_ENGINE_DEFAULTS, type Faults, type Logger, type Pool } from '@oncehook/shared';
import type { EventJobData } from './vocabulary.js';
import type { EngineHooks } from './handler-context.js';
import { processJob, type JobOutcome, type ProcessDeps, type ProcessSettings } from './process-event.js';
import { HandlerRegistry } from './registry.js';
import { createQueries } from './store/queries.js';

/**
 * The engine's defaults: the worker's configuration defaults (@oncehook/shared config.ts,
 * LEASE_MS, MAX_ATTEMPTS, RETRY_BACKOFF_MS, UNHANDLED_EVENTS), read from there.
 */
export const DEFAULT_ENGINE_SETTINGS: ProcessSettings = {
  leaseMs: WORKER_ENGINE_DEFAULTS.LEASE_MS,
  retry: { maxAttempts: WORKER_ENGINE_DEFAULTS.MAX_ATTEMPTS, backoffMs: WORKER_ENGINE_DEFAULTS.RETRY_BACKOFF_MS },
  unhandled: WORKER_ENGINE_DEFAULTS.UNHANDLED_EVENTS,
};

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
}

export interface Engine extends ProcessDeps {
  /** Runs one job through the state machine (processJob). */
  processJob(job: EventJobData): Promise<JobOutcome>;
}

export function createEngine(options: EngineOptions): Engine {
  const deps: ProcessDeps = {
    pool: options.pool,
    queries: createQueries(options.schema),
    registry: options.handlers instanceof HandlerRegistry ? options.handlers : new HandlerRegistry(options.handlers),
    log: options.log,
    faults: options.faults ?? noFaults,
    settings: { ...DEFAULT_ENGINE_SETTINGS, ...options.settings },
    ...(options.hooks ? { hooks: options.hooks } : {}),
    ...(options.onUnhandled ? { onUnhandled: options.onUnhandled } : {}),
  };
  return { ...deps, processJob: (job) => processJob(deps, job) };
}
