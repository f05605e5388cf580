/**
 * The context handed to a handler for one attempt of one run: fenced local steps
 * (`transaction`, `ordered`, `lock`) and external steps with an idempotency key (`step`), both
 * recorded, so a resumed attempt gets each committed step's result instead of running it again.
 * The parts live in steps/ (run-scope.ts, step-rules.ts, run-fence.ts, local-step.ts,
 * external-step.ts); this file puts them together. How a step, its fence and the lease fit:
 * docs/architecture.md, "Leases and the fence".
 */
import type { Logger } from '@oncehook/shared';
import type { HandlerContext } from '@oncehook/sdk';
import type { RecordedStep } from './store/queries.js';
import { runExternalStep } from './steps/external-step.js';
import { lock, ordered, runLocalStep } from './steps/local-step.js';
import type { RunDeps, RunHandle, RunScope } from './steps/run-scope.js';

export { currentStep, RunStoppedError, subscribeHooks, trackCurrentStep, type CurrentStep, type EngineHooks, type RunHandle } from './steps/run-scope.js';

export interface RunContext extends HandlerContext {
  /** True once a `final` step committed the run's `done` transition. */
  readonly completed: boolean;
  /** True while a local step's transaction holds the run row (the lease keeper then waits). */
  readonly holdsRunRow: boolean;
}

export function createRunContext(deps: RunDeps, run: RunHandle, recordedSteps: RecordedStep[], log: Logger, signal: AbortSignal): RunContext {
  const scope: RunScope = {
    deps,
    run,
    log,
    signal,
    recorded: new Map(recordedSteps.map((step) => [step.name, step])),
    used: new Set<string>(),
    completed: false,
    openLocalSteps: 0,
    localStep: undefined,
  };
  return {
    log,
    signal,
    transaction: ((name, fn, options) => runLocalStep(scope, name, fn, options)) as HandlerContext['transaction'],
    step: ((name, fn, options) => runExternalStep(scope, name, fn, options)) as HandlerContext['step'],
    ordered: (objectKey, version) => ordered(scope, objectKey, version),
    lock: (objectKey) => lock(scope, objectKey),
    get completed() {
      return scope.completed;
    },
    get holdsRunRow() {
      return scope.openLocalSteps > 0;
    },
  };
}
