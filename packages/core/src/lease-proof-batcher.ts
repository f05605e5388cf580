/**
 * Group commit for the lease proof before an external step's call (group-commit.ts): the proof
 * that finds none in flight goes at once, alone, through RENEW_LEASE_AT_STEP; the proofs that
 * arrive while one is in flight go together, in ONE statement (queries.renewLeasesAtStep,
 * RENEW_LEASES_AT_STEP): a read for each run whose lease has the call's time left by Postgres's
 * clock, a renewal under its own token for the others. Each answers what alone would (null: the
 * lease is no longer ours, and the call is not made). Two proofs of one run (steps side by side)
 * never share a batch.
 */
import type { Pool } from '@oncehook/shared';
import { createGroupCommit } from './group-commit.js';
import type { Queries } from './store/queries.js';

export interface LeaseProofBatcherOptions {
  pool: Pool;
  queries: Pick<Queries, 'renewLeaseAtStep' | 'renewLeasesAtStep'>;
  /** Most runs in one statement (default 64). */
  maxBatch?: number;
  /** Called with each batch's size (tests, benches). */
  onBatch?: (size: number) => void;
}

export interface LeaseProof {
  runId: number;
  token: string;
  /** The lease's length, for a renewal. */
  leaseMs: number;
  /** What the call needs left of the lease for a read to prove it. */
  needMs: number;
}

export interface LeaseProofBatcher {
  /** The lease proven (a read) or renewed, and whether the run must stop here; null = no longer ours. */
  prove(proof: LeaseProof): Promise<{ stop: boolean; renewed: boolean } | null>;
}

export function createLeaseProofBatcher(options: LeaseProofBatcherOptions): LeaseProofBatcher {
  const { pool, queries } = options;
  const prove = createGroupCommit<LeaseProof, { stop: boolean; renewed: boolean } | null>({
    keyOf: (proof) => proof.runId,
    one: (proof) => queries.renewLeaseAtStep(pool, proof.runId, proof.token, proof.leaseMs, proof.needMs),
    many: (proofs) => queries.renewLeasesAtStep(pool, proofs),
    missing: null,
    maxBatch: options.maxBatch ?? 64,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return { prove };
}
