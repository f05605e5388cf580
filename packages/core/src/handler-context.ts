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
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Span } from '@opentelemetry/api';
import { idempotencyKeyFor } from './idempotency-key.js';
import { inSpan, withTransaction, type Faults, type Logger, type Pool, type PoolClient, type StepKind } from '@oncehook/shared';
import { LeaseLostError, StepUsageError, type Json } from '@oncehook/sdk';
import { toRecordedJson } from '@oncehook/sdk/internal';
import type { Queries, RecordedStep } from './store/queries.js';
import type { HandlerContext, Ordering, StepInput, StepOptions, TransactionOptions } from '@oncehook/sdk';

export interface RunHandle {
  runId: number;
  token: string;
  provider: string;
  eventId: string;
  handler: string;
  attempt: number;
  generation: number;
  keyScheme: 1 | 2;
  leaseMs: number;
  /** A renewal sent at `sentAt` (performance.now()) committed: the lease clock moves its end (lease-clock.ts). */
  onLeaseRenewed?: (sentAt: number) => void;
}

/** The step a piece of handler code runs in (for the test kit's request records). */
export interface CurrentStep {
  runId: number;
  handler: string;
  step: string;
  kind: StepKind;
  attempt: number;
  idempotencyKey: string | null;
}

const currentStepStorage = new AsyncLocalStorage<CurrentStep>();

/** The transaction of the local step the calling code runs inside (ctx.ordered and ctx.lock use it). */
const localTransactionStorage = new AsyncLocalStorage<{ tx: PoolClient; step: string; runId: number }>();

/** The step the calling code runs inside, if any. */
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

export function currentStep(): CurrentStep | undefined {
  return currentStepStorage.getStore();
}

/**
 * Observers of the engine, for the test kit (and anyone who wants to watch): called
 * synchronously, must not throw.
 */
export interface EngineHooks {
  /** An external step's function is about to be called with this key. */
  externalCall?(info: CurrentStep): void;
  /** A step's record committed (a local step: with its writes). */
  stepCommitted?(info: CurrentStep): void;
}

export interface RunContext extends HandlerContext {
  /** True once a `final` step committed the run's `done` transition. */
  readonly completed: boolean;
  /** True while a local step's transaction holds the run row (the lease keeper then waits). */
  readonly holdsRunRow: boolean;
}

const STEP_NAME = /^[^\x00-\x1f\x7f]{1,200}$/;

export function createRunContext(
  deps: { pool: Pool; queries: Queries; faults: Faults; hooks?: EngineHooks },
  run: RunHandle,
  recordedSteps: RecordedStep[],
  log: Logger,
  signal: AbortSignal,
): RunContext {
  const { queries } = deps;
  const recorded = new Map(recordedSteps.map((step) => [step.name, step]));
  const used = new Set<string>();
  let completed = false;
  /** Local step transactions of this run open now (a handler may run steps side by side). */
  let openLocalSteps = 0;

  function claimName(name: string, kind: StepKind): RecordedStep | undefined {
    if (typeof name !== 'string' || !STEP_NAME.test(name)) {
      throw new StepUsageError(`step name ${JSON.stringify(name)} in handler "${run.handler}" is not valid: use 1-200 characters without control characters`);
    }
    if (used.has(name)) {
      throw new StepUsageError(
        `step name "${name}" is used twice in one run of handler "${run.handler}": each step is recorded (and its key derived) by name, so the second call would be skipped and get the first one's result. Give each call its own stable name, e.g. put the loop variable in it: ctx.${kind === 'local' ? 'transaction' : 'step'}(\`${name}:\${item.id}\`, ...)`,
      );
    }
    used.add(name);
    const record = recorded.get(name);
    if (record?.kind && record.kind !== kind) {
      throw new StepUsageError(
        `step "${name}" of handler "${run.handler}" was recorded as ${record.kind === 'local' ? 'a local step (ctx.transaction)' : 'an external step (ctx.step)'} and is now called as ${kind === 'local' ? 'ctx.transaction' : 'ctx.step'}; give the changed step a new name`,
      );
    }
    return record;
  }

  /** The step's `key` option, checked: a domain object's id, as a non-empty line of text. */
  function checkSubject(name: string, options: StepOptions): string | null {
    const { key } = options;
    if (key === undefined) return null;
    if (typeof key !== 'string' || key.length === 0 || key.length > 500 || /[\u0000-\u001f\u007f]/.test(key)) {
      throw new StepUsageError(
        `the key of step "${name}" in handler "${run.handler}" must be the id of the object the effect is about, as 1-500 characters without control characters (got ${typeof key === 'string' ? JSON.stringify(key.slice(0, 40)) : typeof key}), e.g. { key: \`order:\${order.id}\` }`,
      );
    }
    return key;
  }

  function checkLease(): void {
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new LeaseLostError(run.runId);
  }

  /**
   * Runs fn in a transaction that first takes the fence: the run row locked FOR NO KEY UPDATE
   * with our lease token. Until COMMIT no one can take the run over; if someone already has,
   * LeaseLostError and nothing commits.
   */
  async function withFence<R>(fn: (tx: PoolClient, generation: number, fencedAt: number) => Promise<R>): Promise<R> {
    checkLease();
    openLocalSteps += 1;
    try {
      return await withTransaction(deps.pool, async (tx) => {
        const fence = await queries.lockLeasedRun(tx, run.runId, run.token);
        if (!fence) throw new LeaseLostError(run.runId);
        if (fence.stop) throw new RunStoppedError(run.runId);
        return fn(tx, fence.generation, Date.now());
      });
    } finally {
      openLocalSteps -= 1;
    }
  }

  /**
   * The lease keeper skips its renewals while we hold the run row: a step that held it longer
   * than a third of the lease renews it here, inside its own transaction (before its record),
   * so the lease is fresh the moment the row is released.
   */
  async function renewIfHeldLong(tx: PoolClient, fencedAt: number): Promise<number | null> {
    if (Date.now() - fencedAt <= run.leaseMs / 3) return null;
    const sentAt = performance.now();
    if (!(await queries.renewLease(tx, run.runId, run.token, run.leaseMs))) throw new LeaseLostError(run.runId);
    return sentAt;
  }

  async function finishRun(db: PoolClient | Pool): Promise<void> {
    if (!(await queries.markRunDone(db, run.runId, run.token))) throw new LeaseLostError(run.runId);
  }

  async function transaction<T>(name: string, fn: (tx: PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const record = claimName(name, 'local');
    const info: CurrentStep = { runId: run.runId, handler: run.handler, step: name, kind: 'local', attempt: run.attempt, idempotencyKey: null };
    if (record) {
      // Committed by an earlier attempt (or reused by a replay): hand back its record.
      if (options.final) {
        checkLease();
        await finishRun(deps.pool);
        completed = true;
      }
      log.info({ step: name, kind: 'local' }, 'step already committed; skipped');
      return record.result as T;
    }
    /** When the step renewed the lease inside its transaction (it counts once the step commits). */
    let renewedAt: number | null = null;
    const result = await inSpan('oncehook.step', { attributes: { 'oncehook.step': name, 'oncehook.step.kind': 'local' } }, () =>
      withFence(async (tx, generation, fencedAt) => {
        const value: Json = toRecordedJson(await currentStepStorage.run(info, () => localTransactionStorage.run({ tx, step: name, runId: run.runId }, () => fn(tx))), name);
        if (options.final) {
          // The record and the run's `done` in one statement (one round trip less per event).
          if (!(await queries.recordFinalStep(tx, { runId: run.runId, generation, name, result: value }, run.token))) throw new LeaseLostError(run.runId);
        } else {
          renewedAt = await renewIfHeldLong(tx, fencedAt);
          await queries.recordStep(tx, { runId: run.runId, generation, name, kind: 'local', result: value, idempotencyKey: null });
        }
        await deps.faults.hit('worker.step-before-commit', { step: name });
        return value;
      }),
    );
    if (options.final) completed = true;
    if (renewedAt !== null) run.onLeaseRenewed?.(renewedAt);
    deps.hooks?.stepCommitted?.(info);
    log.info({ step: name, kind: 'local' }, 'step committed');
    return result as T;
  }

  async function step<T>(name: string, fn: (input: StepInput) => Promise<T>, options: StepOptions = {}): Promise<T> {
    const subject = checkSubject(name, options);
    const record = claimName(name, 'external');
    if (record) {
      log.info({ step: name, kind: 'external' }, 'step already recorded; skipped');
      return record.result as T;
    }
    return inSpan('oncehook.step', { attributes: { 'oncehook.step': name, 'oncehook.step.kind': 'external' } }, (span) => callAndRecord(name, fn, subject, span));
  }

  /** An external step not recorded yet: prove the lease, call with the step's key, record. */
  async function callAndRecord<T>(name: string, fn: (input: StepInput) => Promise<T>, subject: string | null, span: Span): Promise<T> {
    // A worker that stalled past its lease must not call out at all (the run may have been
    // finished and even replayed meanwhile, and an API forgets keys after a while): prove
    // the lease, and renew it so the call has all of it.
    checkLease();
    const sentAt = performance.now();
    const renewed = await queries.renewLeaseAtStep(deps.pool, run.runId, run.token, run.leaseMs);
    if (!renewed) throw new LeaseLostError(run.runId);
    run.onLeaseRenewed?.(sentAt);
    if (renewed.stop) throw new RunStoppedError(run.runId);
    const idempotencyKey = idempotencyKeyFor({
      provider: run.provider,
      eventId: run.eventId,
      handler: run.handler,
      step: name,
      generation: run.generation,
      keyScheme: run.keyScheme,
      subject,
    });
    const info: CurrentStep = { runId: run.runId, handler: run.handler, step: name, kind: 'external', attempt: run.attempt, idempotencyKey };
    span.setAttribute('oncehook.idempotency_key', idempotencyKey);
    log.info({ step: name, kind: 'external', idempotencyKey }, 'calling external step');
    deps.hooks?.externalCall?.(info);
    const returned = await currentStepStorage.run(info, () => fn({ idempotencyKey, signal, attempt: run.attempt }));
    await deps.faults.hit('worker.after-external-call', { step: name });
    const value = toRecordedJson(returned, name);
    await withFence(async (tx, generation) => {
      if (generation !== run.generation) throw new LeaseLostError(run.runId); // replayed meanwhile
      await queries.recordStep(tx, { runId: run.runId, generation, name, kind: 'external', result: value, idempotencyKey, keySubject: subject });
    });
    deps.hooks?.stepCommitted?.(info);
    log.info({ step: name, kind: 'external', idempotencyKey }, 'external step recorded');
    return value as T;
  }

  /** The current local step's transaction; StepUsageError outside one (or inside another run's). */
  function localTransaction(method: 'ordered' | 'lock', objectKey: unknown): { tx: PoolClient; step: string } {
    const local = localTransactionStorage.getStore();
    if (!local || local.runId !== run.runId) {
      throw new StepUsageError(
        `ctx.${method}() in handler "${run.handler}" must be called inside a local step, where its effect commits with the step's writes: await ctx.transaction('apply', async (tx) => { ${method === 'ordered' ? "const { stale } = await ctx.ordered('customer:' + id, event.signedAt); if (stale) return { skipped: 'stale' };" : "await ctx.lock('order:' + id);"} ... })`,
      );
    }
    if (typeof objectKey !== 'string' || objectKey.length === 0 || objectKey.length > 500 || /[\u0000-\u001f\u007f]/.test(objectKey)) {
      throw new StepUsageError(
        `the object key given to ctx.${method}() in handler "${run.handler}" must be 1-500 characters without control characters, e.g. \`customer:\${customer.id}\``,
      );
    }
    return local;
  }

  async function ordered(objectKey: string, version: number | Date): Promise<Ordering> {
    const { tx, step } = localTransaction('ordered', objectKey);
    const value = version instanceof Date ? version.getTime() : version;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw new StepUsageError(
        `the version given to ctx.ordered('${objectKey}', ...) in handler "${run.handler}" must be a finite number or a valid Date (got ${String(version)})`,
      );
    }
    const { stale, previous } = await queries.recordObjectVersion(tx, run.handler, objectKey, value);
    if (stale) log.info({ step, objectKey, version: value, newest: previous }, 'stale update: a newer version of this object was applied already');
    return { stale, previous, version: value };
  }

  async function lock(objectKey: string): Promise<void> {
    const { tx } = localTransaction('lock', objectKey);
    await queries.lockObject(tx, objectKey);
  }

  return {
    log,
    signal,
    transaction: transaction as HandlerContext['transaction'],
    step: step as HandlerContext['step'],
    ordered,
    lock,
    get completed() {
      return completed;
    },
    get holdsRunRow() {
      return openLocalSteps > 0;
    },
  };
}
