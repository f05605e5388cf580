/**
 * What the parts of a run's context share for one attempt of one run (handler-context.ts puts
 * them together): the run's lease, its recorded steps, the names used so far, and the
 * async-local stores that tell code which step it runs inside.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Faults, Logger, Pool, PoolClient } from '@oncehook/shared';
import type { CurrentStep, EngineEvents } from '../engine-events.js';
import type { RunBatchers } from '../run-batchers.js';
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
  /** The run statements group-committed across runs (run-batchers.ts), on `pool`. */
  batched: RunBatchers;
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
  /**
   * The run's local step whose function runs now, with its transaction: ctx.ordered and ctx.lock
   * called by the run belong to it (inLocalStep).
   */
  localStep: LocalStepContext | undefined;
}

/** A local step's transaction, for ctx.ordered and ctx.lock (localTransaction in step-rules.ts). */
export interface LocalStepContext {
  tx: PoolClient;
  step: string;
}

/*
 * Why the engine keeps out of AsyncLocalStorage on its hot path: on Node 20 the first `run()` of
 * any AsyncLocalStorage turns on an async hook that runs for EVERY promise the process creates
 * from then on (pg, ioredis and BullMQ make thousands per event). Measured: a worker draining a
 * backlog spends 0.87x the CPU per event without it (`npm run bench:backlog -- --sizes 6000
 * --rounds 3`, docs/benchmarks.md). So the current step is stored only when a caller asked for
 * it (trackCurrentStep), and a local step's transaction is the run's, not the async context's
 * (inLocalStep).
 */
const currentStepStorage = new AsyncLocalStorage<CurrentStep>();
let trackingSteps = false;

/**
 * From now on, `currentStep()` answers inside every step of this process (the testkit's checks
 * attribute each outbound request to its step). Costs the process an async hook on every
 * promise (above): for tests and tools, not for a worker.
 */
export function trackCurrentStep(): void {
  trackingSteps = true;
}

/** The step the calling code runs inside, once `trackCurrentStep()` was called; else undefined. */
export function currentStep(): CurrentStep | undefined {
  return currentStepStorage.getStore();
}

/** Runs a step's user function with `currentStep()` answering `info` inside it (when tracked). */
export function inStep<T>(info: CurrentStep, fn: () => Promise<T>): Promise<T> {
  // mutant: step-always-tracked
  return trackingSteps ? currentStepStorage.run(info, fn) : fn();
}

/**
 * Runs a local step's user function as the run's local step: ctx.ordered and ctx.lock called
 * by the run meanwhile use its transaction. At most one local step of a run is inside its
 * function at a time: each takes the run row's lock (the fence, run-fence.ts) before it, and
 * holds it until its COMMIT, so a step started beside another waits at its fence until the
 * other has committed. What this does not catch (an async context would): ctx.ordered called by
 * code of the run that runs beside the step but outside it (`Promise.all([ctx.transaction(..),
 * ctx.ordered(..)])`) joins the open step's transaction instead of failing.
 */
export async function inLocalStep<T>(scope: RunScope, local: LocalStepContext, fn: () => Promise<T>): Promise<T> {
  // mutant: local-step-not-the-runs
  scope.localStep = local;
  try {
    return await fn();
  } finally {
    scope.localStep = undefined;
  }
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
