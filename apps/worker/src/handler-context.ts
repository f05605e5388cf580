/**
 * The context handed to a handler, and the fenced step transaction behind it.
 */
import { LeaseLostError, queries, type Faults, type Logger, type Pool } from '@oncehook/shared';
import type { HandlerContext, TransactionOptions } from './handlers';

export interface LeaseHandle {
  rowId: number;
  token: string;
}

export interface StepContext extends HandlerContext {
  /** True once a step committed the `done` transition (completesEvent). */
  readonly completed: boolean;
}

export function createHandlerContext(deps: { pool: Pool; faults: Faults }, lease: LeaseHandle, log: Logger, signal: AbortSignal): StepContext {
  let completed = false;

  async function transaction<T>(step: string, fn: Parameters<HandlerContext['transaction']>[1], options: TransactionOptions = {}): Promise<T> {
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new LeaseLostError(lease.rowId);
    const client = await deps.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      // The fence: lock the event row and prove the lease is still ours. Until COMMIT, no
      // one can take the event over; if someone already has, we commit nothing.
      const fence = await queries.lockLeasedEvent(client, lease.rowId, lease.token);
      if (!fence) throw new LeaseLostError(lease.rowId);

      const recorded = await queries.findStep(client, lease.rowId, fence.generation, step);
      let result: T;
      if (recorded) {
        // Committed by an earlier attempt: skip it, hand back what it recorded.
        log.info({ step }, 'step already committed; skipping');
        result = recorded.result as T;
      } else {
        result = (await fn(client)) as T;
        await queries.recordStep(client, lease.rowId, fence.generation, step, result);
      }
      if (options.completesEvent) {
        // processing -> done inside the same transaction; we hold the row lock, so this
        // cannot miss unless the fence above already failed.
        if (!(await queries.markDone(client, lease.rowId, lease.token))) throw new LeaseLostError(lease.rowId);
      }
      await deps.faults.hit('worker.step-before-commit');
      await client.query('COMMIT');
      if (options.completesEvent) completed = true;
      if (!recorded) log.info({ step }, 'step committed');
      return result;
    } catch (error) {
      broken = await client.query('ROLLBACK').then(
        () => false,
        () => true,
      );
      throw error;
    } finally {
      client.release(broken);
    }
  }

  return {
    log,
    signal,
    transaction: transaction as HandlerContext['transaction'],
    get completed() {
      return completed;
    },
  };
}
