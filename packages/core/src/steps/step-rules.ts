/**
 * How a handler may use steps, checked before anything runs (a mistake fails the run at once
 * with StepUsageError, a PermanentError, and a message that says what to write instead): a
 * step name is valid and used once per attempt, a step keeps its kind across attempts, a
 * step's key and an object key are a line of text, ctx.ordered and ctx.lock run inside a
 * local step of this run.
 */
import type { PoolClient } from '@oncehook/shared';
import type { StepKind } from '../vocabulary.js';
import { StepUsageError, type StepOptions } from '@oncehook/sdk';
import type { RecordedStep } from '../store/queries.js';
import type { RunScope } from './run-scope.js';

const STEP_NAME = /^[^\x00-\x1f\x7f]{1,200}$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Takes the step's name for this attempt; returns what an earlier attempt recorded under it. */
export function claimName(scope: RunScope, name: string, kind: StepKind): RecordedStep | undefined {
  const { used, run } = scope;
  if (typeof name !== 'string' || !STEP_NAME.test(name)) {
    throw new StepUsageError(`step name ${JSON.stringify(name)} in handler "${run.handler}" is not valid: use 1-200 characters without control characters`);
  }
  // mutant: step-name-reuse
  if (used.has(name)) {
    throw new StepUsageError(
      `step name "${name}" is used twice in one run of handler "${run.handler}": each step is recorded (and its key derived) by name, so the second call would be skipped and get the first one's result. Give each call its own stable name, e.g. put the loop variable in it: ctx.${kind === 'local' ? 'transaction' : 'step'}(\`${name}:\${item.id}\`, ...)`,
    );
  }
  used.add(name);
  const record = scope.recorded.get(name);
  if (record?.kind && record.kind !== kind) {
    throw new StepUsageError(
      `step "${name}" of handler "${run.handler}" was recorded as ${record.kind === 'local' ? 'a local step (ctx.transaction)' : 'an external step (ctx.step)'} and is now called as ${kind === 'local' ? 'ctx.transaction' : 'ctx.step'}; give the changed step a new name`,
    );
  }
  return record;
}

/** The step's `key` option, checked: a domain object's id, as a non-empty line of text. */
export function checkSubject(scope: RunScope, name: string, options: StepOptions): string | null {
  const { key } = options;
  if (key === undefined) return null;
  if (typeof key !== 'string' || key.length === 0 || key.length > 500 || CONTROL.test(key)) {
    throw new StepUsageError(
      `the key of step "${name}" in handler "${scope.run.handler}" must be the id of the object the effect is about, as 1-500 characters without control characters (got ${typeof key === 'string' ? JSON.stringify(key.slice(0, 40)) : typeof key}), e.g. { key: \`order:\${order.id}\` }`,
    );
  }
  return key;
}

/** The run's open local step's transaction (inLocalStep); StepUsageError when none is open. */
export function localTransaction(scope: RunScope, method: 'ordered' | 'lock', objectKey: unknown): { tx: PoolClient; step: string } {
  const { run } = scope;
  const local = scope.localStep;
  if (!local) {
    throw new StepUsageError(
      `ctx.${method}() in handler "${run.handler}" must be called inside a local step, where its effect commits with the step's writes: await ctx.transaction('apply', async (tx) => { ${method === 'ordered' ? "const { stale } = await ctx.ordered('customer:' + id, event.signedAt); if (stale) return { skipped: 'stale' };" : "await ctx.lock('order:' + id);"} ... })`,
    );
  }
  if (typeof objectKey !== 'string' || objectKey.length === 0 || objectKey.length > 500 || CONTROL.test(objectKey)) {
    throw new StepUsageError(
      `the object key given to ctx.${method}() in handler "${run.handler}" must be 1-500 characters without control characters, e.g. \`customer:\${customer.id}\``,
    );
  }
  return local;
}
