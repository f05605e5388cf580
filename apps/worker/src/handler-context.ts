/**
 * The context handed to a handler: fenced local steps (`transaction`) and external steps with
 * an idempotency key (`step`), both recorded as recovery points.
 *
 * Local step:    BEGIN; fence; [already recorded? return it]; fn(tx); record; [done]; COMMIT
 * External step: fence + read record (short tx) -> recorded? return it
 *                fn({ idempotencyKey }) outside any transaction (no lock held over the network)
 *                BEGIN; fence; record; COMMIT
 * A crash between the call and the record re-runs the call on the next attempt with the SAME
 * key, and the downstream API applies nothing new.
 */
import { idempotencyKeyFor, LeaseLostError, queries, withTransaction, type Faults, type Logger, type Pool, type PoolClient } from '@oncehook/shared';
import type { ExternalStepInput, HandlerContext, TransactionOptions } from './handlers';

export interface LeaseHandle {
  rowId: number;
  token: string;
  provider: string;
  eventId: string;
  attempt: number;
}

export interface StepContext extends HandlerContext {
  /** True once a step committed the `done` transition (completesEvent). */
  readonly completed: boolean;
}

export function createHandlerContext(deps: { pool: Pool; faults: Faults }, lease: LeaseHandle, log: Logger, signal: AbortSignal): StepContext {
  let completed = false;

  /**
   * Runs fn in a transaction that first takes the fence: the event row locked FOR NO KEY
   * UPDATE with our lease token. Until COMMIT no one can take the event over; if someone
   * already has, LeaseLostError and nothing commits.
   */
  async function withFence<R>(fn: (tx: PoolClient, generation: number) => Promise<R>): Promise<R> {
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new LeaseLostError(lease.rowId);
    return withTransaction(deps.pool, async (tx) => {
      const fence = await queries.lockLeasedEvent(tx, lease.rowId, lease.token);
      if (!fence) throw new LeaseLostError(lease.rowId);
      return fn(tx, fence.generation);
    });
  }

  async function transaction<T>(step: string, fn: (tx: PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    let skipped = false;
    const result = await withFence(async (tx, generation) => {
      const recorded = await queries.findStep(tx, lease.rowId, generation, step);
      let value: T;
      if (recorded) {
        // Committed by an earlier attempt: skip it, hand back what it recorded.
        skipped = true;
        value = recorded.result as T;
      } else {
        value = await fn(tx);
        await queries.recordStep(tx, lease.rowId, generation, step, value);
      }
      if (options.completesEvent) {
        // processing -> done inside the same transaction; we hold the row lock, so this
        // cannot miss unless the fence already failed.
        if (!(await queries.markDone(tx, lease.rowId, lease.token))) throw new LeaseLostError(lease.rowId);
      }
      await deps.faults.hit('worker.step-before-commit');
      return value;
    });
    if (options.completesEvent) completed = true;
    log.info({ step, kind: 'local' }, skipped ? 'step already committed; skipped' : 'step committed');
    return result;
  }

  async function step<T>(name: string, fn: (input: ExternalStepInput) => Promise<T>): Promise<T> {
    const recorded = await withFence(async (tx, generation) => ({ generation, found: await queries.findStep(tx, lease.rowId, generation, name) }));
    if (recorded.found) {
      log.info({ step: name, kind: 'external' }, 'step already recorded; skipped');
      return recorded.found.result as T;
    }
    const idempotencyKey = idempotencyKeyFor(lease.provider, lease.eventId, name, recorded.generation);
    log.info({ step: name, kind: 'external', idempotencyKey }, 'calling external step');
    const result = await fn({ idempotencyKey, signal, attempt: lease.attempt });
    await deps.faults.hit('worker.after-external-call');
    await withFence(async (tx, generation) => {
      if (generation !== recorded.generation) throw new LeaseLostError(lease.rowId); // replayed meanwhile
      await queries.recordStep(tx, lease.rowId, generation, name, result);
    });
    log.info({ step: name, kind: 'external', idempotencyKey }, 'external step recorded');
    return result;
  }

  return {
    log,
    signal,
    transaction,
    step,
    get completed() {
      return completed;
    },
  };
}
