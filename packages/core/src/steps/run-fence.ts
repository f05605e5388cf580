/**
 * The run's lease as its steps prove it: `checkLease` before any work (a worker whose lease
 * was taken over stops), `withFence` for every record (a transaction that first locks the run
 * row with our token: until COMMIT no one can take the run over, and a run taken over commits
 * nothing), and the renewals a long local step owes the lease keeper.
 */
import { commitWith, withTransactionFrom, type Pool, type PoolClient, type PreparedStatement } from '@oncehook/shared';
import { LEASE_LOST, type RunFence } from '../store/runs.js';
import { LeaseLostError } from '@oncehook/sdk';
import { RunStoppedError, type RunScope } from './run-scope.js';

export function checkLease(scope: RunScope): void {
  const { signal, run } = scope;
  if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new LeaseLostError(run.runId);
}

/**
 * Runs fn in a transaction that first takes the fence: the run row locked FOR NO KEY UPDATE
 * with our lease token. Until COMMIT no one can take the run over; if someone already has,
 * LeaseLostError and nothing commits. While it is open the lease keeper skips its renewals
 * (`openLocalSteps`: they would only queue behind our row lock).
 */
export async function withFence<R>(scope: RunScope, fn: (tx: PoolClient, generation: number, fencedAt: number) => Promise<R>): Promise<R> {
  const { deps, run } = scope;
  checkLease(scope);
  scope.openLocalSteps += 1;
  try {
    // BEGIN and the fence travel in one round trip (withTransactionFrom).
    return await withTransactionFrom<RunFence, R>(deps.pool, deps.queries.fenceStatement(run.runId, run.token), async (tx, { rows }) => {
      const fence = rows[0];
      if (!fence) throw new LeaseLostError(run.runId);
      // mutant: stop-now-ignored-local
      if (fence.stop) throw new RunStoppedError(run.runId);
      return fn(tx, fence.generation, Date.now());
    });
  } finally {
    scope.openLocalSteps -= 1;
  }
}

/**
 * The lease keeper skips its renewals while we hold the run row: a step that held it longer
 * than a third of the lease renews it here, inside its own transaction (before its record),
 * so the lease is fresh the moment the row is released. Returns when the renewal was sent.
 */
export async function renewIfHeldLong(scope: RunScope, tx: PoolClient, fencedAt: number): Promise<number | null> {
  const { run } = scope;
  // mutant: step-lease-not-renewed
  if (Date.now() - fencedAt <= run.leaseMs / 3) return null;
  const sentAt = performance.now();
  if (!(await scope.deps.queries.renewLease(tx, run.runId, run.token, run.leaseMs))) throw new LeaseLostError(run.runId);
  return sentAt;
}

/**
 * Ends a withFence transaction: the step's record and COMMIT in one round trip (commitWith).
 * A final record that found the lease no longer ours fails with LEASE_LOST: nothing commits,
 * LeaseLostError.
 */
export async function commitRecord(scope: RunScope, tx: PoolClient, record: PreparedStatement): Promise<void> {
  try {
    await commitWith(tx, record);
  } catch (error) {
    if ((error as { code?: unknown }).code === LEASE_LOST) throw new LeaseLostError(scope.run.runId);
    throw error;
  }
}

/** The run's `done`, fenced by our token (a final step whose record an earlier attempt committed). */
export async function finishRun(scope: RunScope, db: PoolClient | Pool): Promise<void> {
  if (!(await scope.deps.queries.markRunDone(db, scope.run.runId, scope.run.token))) throw new LeaseLostError(scope.run.runId);
}
