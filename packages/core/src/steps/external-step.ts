/**
 * External steps (`ctx.step`):
 *
 *   [recorded? return the record]  prove the lease (a read while half of it is left, else a
 *   renewal that gives the call a full lease); fn({ idempotencyKey }) outside any transaction
 *   (no lock held over the network); check JSON; the record under the fence, one autocommit
 *   statement and one round trip (`final`: the record, the run's done and the event's in it;
 *   RECORD_EXTERNAL_STEP), shared with other runs' records that arrive meanwhile (not final:
 *   RECORD_EXTERNAL_STEPS, run-batchers.ts)
 *
 * A crash between the call and the record re-runs the call on the next attempt with the SAME
 * key (idempotency-key.ts), and the downstream API applies nothing new.
 */
import type { Span } from '@opentelemetry/api';
import { inSpan } from '@oncehook/shared';
import { LeaseLostError, type StepInput, type StepOptions } from '@oncehook/sdk';
import { toRecordedJson } from '@oncehook/sdk/internal';
import { idempotencyKeyFor } from '../idempotency-key.js';
import { checkLease } from './run-fence.js';
import { inStep, RunStoppedError, type CurrentStep, type RunScope } from './run-scope.js';
import { checkSubject, claimName } from './step-rules.js';

export async function runExternalStep<T>(scope: RunScope, name: string, fn: (input: StepInput) => Promise<T>, options: StepOptions = {}): Promise<T> {
  const subject = checkSubject(scope, name, options);
  const record = claimName(scope, name, 'external');
  // mutant: skip-external-step
  if (record) {
    // A final step recorded already (a replay reused it): the run's done follows the handler.
    scope.log.info({ step: name, kind: 'external' }, 'step already recorded; skipped');
    return record.result as T;
  }
  return inSpan('oncehook.step', { attributes: { 'oncehook.step': name, 'oncehook.step.kind': 'external' } }, (span) =>
    callAndRecord(scope, name, fn, subject, options.final === true, span),
  );
}

/** An external step not recorded yet: prove the lease, call with the step's key, record. */
async function callAndRecord<T>(scope: RunScope, name: string, fn: (input: StepInput) => Promise<T>, subject: string | null, final: boolean, span: Span): Promise<T> {
  const { deps, run, log, signal } = scope;
  // A worker that stalled past its lease must not call out at all (the run may have been
  // finished and even replayed meanwhile, and an API forgets keys after a while): prove the
  // lease. With half of it left (Postgres's clock) a read proves it; else it is renewed, so
  // the call has all of it. The lease keeper renews it during the call either way.
  checkLease(scope);
  const sentAt = performance.now();
  // Through group commit with the proofs of other runs that arrive meanwhile (run-batchers.ts).
  // mutant: external-call-without-lease, proof-batch-skipped
  const renewed = await deps.batched.prove({ runId: run.runId, token: run.token, leaseMs: run.leaseMs, needMs: run.leaseMs / 2 });
  if (!renewed) throw new LeaseLostError(run.runId);
  if (renewed.renewed) run.onLeaseRenewed?.(sentAt);
  // mutant: stop-now-ignored-external
  if (renewed.stop) throw new RunStoppedError(run.runId);
  const idempotencyKey = idempotencyKeyFor({
    source: run.source,
    eventId: run.eventId,
    handler: run.handler,
    // mutant: key-includes-attempt
    step: name,
    generation: run.generation,
    keyScheme: run.keyScheme,
    subject,
  });
  const info: CurrentStep = { runId: run.runId, handler: run.handler, step: name, kind: 'external', attempt: run.attempt, idempotencyKey };
  span.setAttribute('oncehook.idempotency_key', idempotencyKey);
  log.info({ step: name, kind: 'external', idempotencyKey }, 'calling external step');
  deps.events.emit('step:calling', info);
  const returned = await inStep(info, () => fn({ idempotencyKey, signal, attempt: run.attempt }));
  await deps.faults.hit('worker.after-external-call', { step: name });
  const value = toRecordedJson(returned, name);
  checkLease(scope);
  // The record under the fence (final: with the run's and the event's done), one statement.
  const step = { runId: run.runId, generation: run.generation, name, kind: 'external' as const, result: value, idempotencyKey, keySubject: subject };
  // Through group commit with the records of other runs that arrive meanwhile (run-batchers.ts);
  // a final one with its run's and event's done, in the same statement.
  // mutant: external-final-not-final, external-batch-skipped
  const fence = await deps.batched.record({ step, token: run.token, final });
  // Taken over, or replayed meanwhile (another generation): nothing was recorded.
  if (!fence?.recorded) throw new LeaseLostError(run.runId);
  if (final) scope.completed = true;
  deps.events.emit('step:committed', info);
  log.info({ step: name, kind: 'external', idempotencyKey }, 'external step recorded');
  // `pause --now` landed during the call: the call is recorded (the resumed run skips it), and
  // the run stops at this boundary (a final step's run is done already: nothing to stop).
  // mutant: stop-now-ignored-external-record
  if (fence.stop && !final) throw new RunStoppedError(run.runId);
  return value as T;
}
