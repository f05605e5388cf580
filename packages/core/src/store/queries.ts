/**
 * The store: every runtime statement against Oncehook's tables, built once per schema
 * (`createQueries(schema)`). The statements are plain text, by stage, in sql/ (the edge's
 * claim; the worker's runs and steps; recovery: the reconciler and retention; operators), each
 * guarded UPDATE saying what a 0-row result means; execution and row decoding are beside them
 * (claim.ts, runs.ts, recovery.ts, operators.ts; rows.ts). Tables: migrations/0001_schema.sql
 * and the migrations after it; the current shape in schema.sql.
 */
import { createActivityQueries } from './activity.js';
import { createBackfillScheduleQueries } from './backfill-schedule.js';
import { createClaimQueries } from './claim.js';
import { createFlowQueries } from './flow.js';
import { createOperatorQueries } from './operators.js';
import { createRecoveryQueries } from './recovery.js';
import { createRunQueries } from './runs.js';
import { tablesFor } from './tables.js';

export * from './rows.js';
export type { ActivityRow, ActivitySample } from './activity.js';
export type { BackfillScheduleRow } from './backfill-schedule.js';
export type { GateRequest, GateResult, PauseRow } from './flow.js';
export { CLAIM_BODY_STRIPES, DELIVERY_LOG_ROWS } from './sql/claim.js';
export { LEASE_LOST, type DispatchRequest, type Dispatched, type RunFence, type StepRecord } from './runs.js';

export function createQueries(schemaName: string) {
  const t = tablesFor(schemaName);
  const runs = createRunQueries(t, schemaName);
  return {
    schema: t.SCHEMA,
    ...createClaimQueries(t, schemaName),
    ...runs,
    ...createFlowQueries(t, schemaName, runs),
    ...createRecoveryQueries(t),
    ...createOperatorQueries(t),
    ...createActivityQueries(t),
    ...createBackfillScheduleQueries(t),
  };
}

export type Queries = ReturnType<typeof createQueries>;
