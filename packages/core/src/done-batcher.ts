/**
 * Group commit for the run's done (group-commit.ts): the done of a run whose handler returned
 * (no `final` step committed it) goes at once, alone, through MARK_RUN_DONE when no other is in
 * flight; the dones that arrive while one is in flight go together, in ONE statement and one
 * commit (queries.markRunsDone, MARK_RUNS_DONE). No code of the handler is in that transaction:
 * each run's done is fenced by its own token, exactly as alone, and answers whether it landed
 * (false: the lease was lost, nothing written for that run). A batch that fails for another
 * reason than an unavailable database (a deadlock with a takeover of an expired lease, say) is
 * done again one run at a time.
 */
import type { Pool } from '@oncehook/shared';
import { createGroupCommit } from './group-commit.js';
import type { Queries } from './store/queries.js';

export interface DoneBatcherOptions {
  pool: Pool;
  queries: Pick<Queries, 'markRunDone' | 'markRunsDone'>;
  /** Most runs in one statement (default 64): bounds the statement's size and its locks. */
  maxBatch?: number;
  /** Called with each batch's size (tests, benches). */
  onBatch?: (size: number) => void;
}

export interface RunToFinish {
  runId: number;
  token: string;
}

export interface DoneBatcher {
  /** processing -> done for the run, fenced by its token; false = the lease was lost. Resolves after its commit. */
  markDone(run: RunToFinish): Promise<boolean>;
}

export function createDoneBatcher(options: DoneBatcherOptions): DoneBatcher {
  const { pool, queries } = options;
  const markDone = createGroupCommit<RunToFinish, boolean>({
    keyOf: (run) => run.runId,
    one: (run) => queries.markRunDone(pool, run.runId, run.token),
    many: async (runs) => {
      const done = await queries.markRunsDone(pool, runs);
      return new Map(runs.map((run) => [run.runId, done.has(run.runId)]));
    },
    missing: false,
    maxBatch: options.maxBatch ?? 64,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return { markDone };
}
