/**
 * Local steps (`ctx.transaction`) and what runs inside them (`ctx.ordered`, `ctx.lock`):
 *
 *   [recorded? return the record]  BEGIN + fence (one round trip); fn(tx); check JSON;
 *   record (final: record + run done + event, one statement) + COMMIT (one round trip)
 *
 * The step's writes and its record commit together, under the fence, so a step either
 * happened once with its record or not at all. A final step whose record an earlier attempt
 * committed still finishes the run (fenced).
 */
import { inSpan, type PoolClient } from '@oncehook/shared';
import { StepUsageError, type Json, type Ordering, type TransactionOptions } from '@oncehook/sdk';
import { toRecordedJson } from '@oncehook/sdk/internal';
import { checkLease, commitRecord, finishRun, renewIfHeldLong, withFence } from './run-fence.js';
import { inLocalStep, inStep, type CurrentStep, type RunScope } from './run-scope.js';
import { claimName, localTransaction } from './step-rules.js';

export async function runLocalStep<T>(scope: RunScope, name: string, fn: (tx: PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  const { deps, run, log } = scope;
  const record = claimName(scope, name, 'local');
  const info: CurrentStep = { runId: run.runId, handler: run.handler, step: name, kind: 'local', attempt: run.attempt, idempotencyKey: null };
  // mutant: skip-local-step
  if (record) {
    // Committed by an earlier attempt (or reused by a replay): hand back its record.
    if (options.final) {
      checkLease(scope);
      await finishRun(scope, deps.pool);
      scope.completed = true;
    }
    log.info({ step: name, kind: 'local' }, 'step already committed; skipped');
    return record.result as T;
  }
  /** When the step renewed the lease inside its transaction (it counts once the step commits). */
  let renewedAt: number | null = null;
  const result = await inSpan('oncehook.step', { attributes: { 'oncehook.step': name, 'oncehook.step.kind': 'local' } }, () =>
    withFence(scope, async (tx, generation, fencedAt) => {
      const value: Json = toRecordedJson(await inStep(info, () => inLocalStep(scope, { tx, step: name }, () => fn(tx))), name);
      // Final: the record and the run's `done` in one statement (one round trip less per event).
      const record = options.final
        ? deps.queries.finalStepRecord({ runId: run.runId, generation, name, kind: 'local', result: value, idempotencyKey: null }, run.token)
        : deps.queries.stepRecord({ runId: run.runId, generation, name, kind: 'local', result: value, idempotencyKey: null });
      if (!options.final) renewedAt = await renewIfHeldLong(scope, tx, fencedAt);
      await deps.faults.hit('worker.step-before-commit', { step: name });
      // The record and COMMIT in one round trip: the record fails, COMMIT is skipped.
      await commitRecord(scope, tx, record);
      return value;
    }),
  );
  if (options.final) scope.completed = true;
  if (renewedAt !== null) run.onLeaseRenewed?.(renewedAt);
  deps.events.emit('step:committed', info);
  log.info({ step: name, kind: 'local' }, 'step committed');
  return result as T;
}

/** ctx.ordered: records the object's version in the step's transaction; stale when a newer one was applied. */
export async function ordered(scope: RunScope, objectKey: string, version: number | Date): Promise<Ordering> {
  const { run, log } = scope;
  const { tx, step } = localTransaction(scope, 'ordered', objectKey);
  const value = version instanceof Date ? version.getTime() : version;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new StepUsageError(`the version given to ctx.ordered('${objectKey}', ...) in handler "${run.handler}" must be a finite number or a valid Date (got ${String(version)})`);
  }
  const { stale, previous } = await scope.deps.queries.recordObjectVersion(tx, run.handler, objectKey, value);
  if (stale) log.info({ step, objectKey, version: value, newest: previous }, 'stale update: a newer version of this object was applied already');
  return { stale, previous, version: value };
}

/** ctx.lock: the object's lock, held by the step's transaction until it commits. */
export async function lock(scope: RunScope, objectKey: string): Promise<void> {
  const { tx } = localTransaction(scope, 'lock', objectKey);
  await scope.deps.queries.lockObject(tx, objectKey);
}
