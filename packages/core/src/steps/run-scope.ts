/**
 * What the parts of a run's context share for one attempt of one run (handler-context.ts puts
 * them together): the run's lease, its recorded steps, the names used so far, and the
 * async-local stores that tell code which step it runs inside.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Faults, Logger, Pool, PoolClient } from '@oncehook/shared';
import type { CurrentStep, EngineEvents } from '../engine-events.js';
import type { Queries, RecordedStep } from '../store/queries.js';

export type { CurrentStep } from '../engine-events.js';

export interface RunHandle {
  runId: number;
  token: string;
  source: string;
  eventId: string;
  handler: string;
  attempt: number;
  generation: number;
  keyScheme: 1 | 2;
  leaseMs: number;
  /** A renewal sent at `sentAt` (performance.now()) committed: the lease clock moves its end (lease-clock.ts). */
  onLeaseRenewed?: (sentAt: number) => void;
}

/**
 * The two step observers `buildWorker({ hooks })` took before the engine's events
 * (engine-events.ts: `step:calling`, `step:committed`). Kept for one release; subscribe to
 * `engine.events` instead.
 * @deprecated
 */
export interface EngineHooks {
  /** An external step's function is about to be called with this key. */
  externalCall?(info: CurrentStep): void;
  /** A step's record committed (a local step: with its writes). */
  stepCommitted?(info: CurrentStep): void;
}

/** Subscribes the old hooks to the engine's events (buildWorker's `hooks` alias). */
export function subscribeHooks(events: EngineEvents, hooks: EngineHooks): void {
  if (hooks.externalCall) events.on('step:calling', (info) => hooks.externalCall?.(info));
  if (hooks.stepCommitted) events.on('step:committed', (info) => hooks.stepCommitted?.(info));
}

export interface RunDeps {
  pool: Pool;
  queries: Queries;
  faults: Faults;
  /** The engine's observation surface: a step about to call out, a step committed. */
  events: EngineEvents;
}

/** One attempt of one run, as its steps see it. */
export interface RunScope {
  deps: RunDeps;
  run: RunHandle;
  log: Logger;
  signal: AbortSignal;
  /** The steps earlier attempts recorded, by name (they came with the lease). */
  recorded: Map<string, RecordedStep>;
  /** The step names this attempt used (a name is used once). */
  used: Set<string>;
  /** True once a `final` step committed the run's `done` transition. */
  completed: boolean;
  /** Local step transactions of this run open now (a handler may run steps side by side). */
  openLocalSteps: number;
}

export const currentStepStorage = new AsyncLocalStorage<CurrentStep>();

/** The transaction of the local step the calling code runs inside (ctx.ordered and ctx.lock use it). */
export const localTransactionStorage = new AsyncLocalStorage<{ tx: PoolClient; step: string; runId: number }>();

/** The step the calling code runs inside, if any. */
export function currentStep(): CurrentStep | undefined {
  return currentStepStorage.getStore();
}

/**
 * Thrown at a step boundary when the run's handler or source was paused with `--now`: the step
 * does not run, the run is released to wait for the resume (process-event.ts). Not a failure.
 */
export class RunStoppedError extends Error {
  override name = 'RunStoppedError';
  constructor(readonly runId: number) {
    super(`run ${runId} stopped at a step boundary: its handler or source was paused with --now`);
  }
}
