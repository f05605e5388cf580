/**
 * Group commit (group-commit.ts) for the worker's own statements about its runs, where no code of
 * a handler is in the transaction. Each goes at once, alone, through its one-run statement when
 * none of its kind is in flight; those that arrive while one is in flight go together, in ONE
 * statement and one commit, each run fenced by its own token exactly as alone:
 *
 * - `markDone`: the run's done when its handler returned and no `final` step committed it
 *   (MARK_RUN_DONE, MARK_RUNS_DONE: each event's counters moved by its runs done there, the
 *   events locked in id order); false = the lease was lost, nothing written for that run;
 * - `prove`: the lease proof before an external step's call (RENEW_LEASE_AT_STEP,
 *   RENEW_LEASES_AT_STEP): a read where the lease has the call's time left by Postgres's clock, a
 *   renewal under its own token where not; null = no longer ours (the call is not made);
 * - `record`: an external step's record (RECORD_EXTERNAL_STEP, RECORD_EXTERNAL_STEPS: under its
 *   run's fence, for the generation its call was made for; a `final` one with its run's done and
 *   its event's counters, in the same statement); null = the lease was lost, nothing written.
 *
 * Two requests of one run (steps side by side) never share a batch. A batch that fails for
 * another reason than an unavailable database (a deadlock with a takeover of an expired lease,
 * say) is done again one run at a time.
 */
import type { Pool } from '@oncehook/shared';
import { createGroupCommit } from './group-commit.js';
import type { Queries, StepRecord } from './store/queries.js';

export type RunStatement = 'done' | 'proof' | 'record';

export interface RunBatchersOptions {
  pool: Pool;
  queries: Pick<Queries, 'markRunDone' | 'markRunsDone' | 'renewLeaseAtStep' | 'renewLeasesAtStep' | 'recordExternalStep' | 'recordExternalSteps'>;
  /** Most runs in one statement (default 64): bounds the statement's size and its locks. */
  maxBatch?: number;
  /** Called with each batch's statement and size (tests, benches). */
  onBatch?: (statement: RunStatement, size: number) => void;
}

/** A run's lease, as a fenced statement names it. */
export interface RunLease {
  runId: number;
  token: string;
}

export interface RunBatchers {
  /** processing -> done for the run, fenced by its token; false = the lease was lost. Resolves after its commit. */
  markDone(run: RunLease): Promise<boolean>;
  /** The lease proven (a read) or renewed (`leaseMs`) with `needMs` left for the call, and whether the run must stop here; null = no longer ours. */
  prove(proof: RunLease & { leaseMs: number; needMs: number }): Promise<{ stop: boolean; renewed: boolean } | null>;
  /** An external step's record under its run's fence (`final`: with the run's and the event's done); null = the lease was lost. Resolves after its commit. */
  record(record: { step: StepRecord; token: string; final: boolean }): Promise<{ stop: boolean; recorded: boolean } | null>;
}

export function createRunBatchers(options: RunBatchersOptions): RunBatchers {
  const { pool, queries } = options;
  const limits = (statement: RunStatement) => ({
    maxBatch: options.maxBatch ?? 64,
    ...(options.onBatch ? { onBatch: (size: number) => options.onBatch?.(statement, size) } : {}),
  });
  return {
    markDone: createGroupCommit<RunLease, boolean>({
      keyOf: (run) => run.runId,
      one: (run) => queries.markRunDone(pool, run.runId, run.token),
      many: async (runs) => {
        const done = await queries.markRunsDone(pool, runs);
        return new Map(runs.map((run) => [run.runId, done.has(run.runId)]));
      },
      missing: false,
      ...limits('done'),
    }),
    prove: createGroupCommit({
      keyOf: (proof) => proof.runId,
      one: (proof) => queries.renewLeaseAtStep(pool, proof.runId, proof.token, proof.leaseMs, proof.needMs),
      many: (proofs) => queries.renewLeasesAtStep(pool, proofs),
      missing: null,
      ...limits('proof'),
    }),
    record: createGroupCommit({
      keyOf: (r) => r.step.runId,
      one: (r) => queries.recordExternalStep(pool, r.step, r.token, r.final),
      many: (records) => queries.recordExternalSteps(pool, records),
      missing: null,
      ...limits('record'),
    }),
  };
}
