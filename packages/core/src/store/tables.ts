/**
 * The qualified names of Oncehook's tables in one schema (ONCEHOOK_SCHEMA, `oncehook` by
 * default; migrations/0001_schema.sql). Every statement in sql/ is built from these.
 */
import { schemaIdentifier } from '@oncehook/shared';

export interface Tables {
  /** The schema, as a quoted identifier. */
  SCHEMA: string;
  EVENTS: string;
  RUNS: string;
  STEPS: string;
  ACTIONS: string;
  DELIVERIES: string;
  DELIVERY_COUNTS: string;
  /** Attempts that ended other than done (migrations/0019); the whole log is ATTEMPT_HISTORY. */
  ATTEMPTS: string;
  /** Every attempt: ATTEMPTS' rows and each run's current attempt, read from the run row (a view). */
  ATTEMPT_HISTORY: string;
  VERSIONS: string;
  HANDLERS: string;
  PAUSES: string;
  RATE_WINDOWS: string;
  HEALTH: string;
  FAILURE_GROUPS: string;
  BACKFILL_SCHEDULE: string;
}

export function tablesFor(schemaName: string): Tables {
  const SCHEMA = schemaIdentifier(schemaName);
  return {
    SCHEMA,
    EVENTS: `${SCHEMA}.events`,
    RUNS: `${SCHEMA}.handler_runs`,
    STEPS: `${SCHEMA}.steps`,
    ACTIONS: `${SCHEMA}.operator_actions`,
    DELIVERIES: `${SCHEMA}.deliveries`,
    DELIVERY_COUNTS: `${SCHEMA}.delivery_counts`,
    ATTEMPTS: `${SCHEMA}.run_attempts`,
    ATTEMPT_HISTORY: `${SCHEMA}.attempt_history`,
    VERSIONS: `${SCHEMA}.object_versions`,
    HANDLERS: `${SCHEMA}.handlers`,
    PAUSES: `${SCHEMA}.pauses`,
    RATE_WINDOWS: `${SCHEMA}.rate_windows`,
    HEALTH: `${SCHEMA}.handler_health`,
    FAILURE_GROUPS: `${SCHEMA}.failure_groups`,
    BACKFILL_SCHEDULE: `${SCHEMA}.backfill_schedule`,
  };
}
