/**
 * The context handed to a handler for one attempt of one run: fenced local steps
 * (`transaction`) and external steps with an idempotency key (`step`), both recorded.
 *
 * Local step:    [recorded? return the record]  BEGIN; fence; fn(tx); check JSON; record
 *                (final: record + run done + event, one statement); COMMIT
 * External step: [recorded? return the record]  renew the lease (proves we still hold it and
 *                gives the call a full lease); fn({ idempotencyKey }) outside any
 *                transaction (no lock held over the network); check JSON;
 *                BEGIN; fence; record; COMMIT
 * A crash between the call and the record re-runs the call on the next attempt with the SAME
 * key, and the downstream API applies nothing new.
 *
 * The records of earlier attempts come with the lease (acquireRun reads them right after
 * taking it), so skipping a recorded step costs no round trip: only the lease holder records
 * steps, and a replay only touches finished runs, so nothing else can add one meanwhile.
 *
 * The lease during a local step: the step's transaction holds the run row (the fence) until it
 * commits, so no one can take the run over meanwhile (a taker waits on the row), and the lease
 * keeper's renewals would only queue behind that lock, one pool connection each. So the keeper
 * skips its renewals while a local step is open (`holdsRunRow`), and a step that was open
 * longer than a third of the lease renews it inside its own transaction before COMMIT: when
 * the row is released, the lease is fresh, and a taker that waited finds it live.
 *
 * Misuse fails the run at once (StepUsageError, a PermanentError): a name used twice in one
 * attempt, a result that JSON would change, a step whose kind differs from its record.
 *
 * Where each part lives (steps/): run-scope.ts (what one attempt's steps share),
 * step-rules.ts (misuse), run-fence.ts (the lease and the fence), local-step.ts
 * (ctx.transaction, ctx.ordered, ctx.lock), external-step.ts (ctx.step); this file puts them
 * together.
 */
import type { Logger } from '@oncehook/shared';
import type { HandlerContext } from '@oncehook/sdk';
import type { RecordedStep } from './store/queries.js';
import { runExternalStep } from './steps/external-step.js';
import { lock, ordered, runLocalStep } from './steps/local-step.js';
import type { RunDeps, RunHandle, RunScope } from './steps/run-scope.js';

export { currentStep, RunStoppedError, subscribeHooks, type CurrentStep, type EngineHooks, type RunHandle } from './steps/run-scope.js';

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
