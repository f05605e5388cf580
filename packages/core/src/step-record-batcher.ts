/**
 * Group commit for external steps' records (group-commit.ts): the record of a call that just
 * returned goes at once, alone, through RECORD_EXTERNAL_STEP when no other is in flight; the
 * records that arrive while one is in flight go together, in ONE statement and one commit
 * (queries.recordExternalSteps, RECORD_EXTERNAL_STEPS). No code of a handler is in that
 * transaction: each record is fenced by its own run's token and generation, exactly as alone,
 * and answers what alone would (null: the lease was lost, nothing written). A `final` step's
 * record (with its run's and event's done) goes alone, as before. Two records of one run (steps
 * side by side) never share a batch.
 */
import type { Pool } from '@oncehook/shared';
import { createGroupCommit } from './group-commit.js';
import type { Queries, StepRecord } from './store/queries.js';

export interface StepRecordBatcherOptions {
  pool: Pool;
  queries: Pick<Queries, 'recordExternalStep' | 'recordExternalSteps'>;
  /** Most records in one statement (default 64): bounds the statement's size and its locks. */
  maxBatch?: number;
  /** Called with each batch's size (tests, benches). */
  onBatch?: (size: number) => void;
}

export interface ExternalRecord {
  step: StepRecord;
  token: string;
}

export interface StepRecordBatcher {
  /** An external step's record under its run's fence (not final); null = the lease was lost. Resolves after its commit. */
  record(record: ExternalRecord): Promise<{ stop: boolean; recorded: boolean } | null>;
}

export function createStepRecordBatcher(options: StepRecordBatcherOptions): StepRecordBatcher {
  const { pool, queries } = options;
  const record = createGroupCommit<ExternalRecord, { stop: boolean; recorded: boolean } | null>({
    keyOf: (r) => r.step.runId,
    one: (r) => queries.recordExternalStep(pool, r.step, r.token, false),
    many: (records) => queries.recordExternalSteps(pool, records),
    missing: null,
    maxBatch: options.maxBatch ?? 64,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return { record };
}
