/**
 * The qualified names of Oncehook's tables in one schema (ONCEHOOK_SCHEMA, `oncehook` by
 * default; migrations/0001_schema.sql). Every statement in sql/ is built from these.
 */
import { schemaIdentifier } from '@oncehook/shared';

export interface Tables {
  /** The schema, as a quoted identifier. */
  S: string;
  EVENTS: string;
  RUNS: string;
  STEPS: string;
  ACTIONS: string;
  DELIVERIES: string;
  DELIVERY_COUNTS: string;
  ATTEMPTS: string;
  VERSIONS: string;
  HANDLERS: string;
  PAUSES: string;
  RATE_WINDOWS: string;
  HEALTH: string;
  FAILURE_GROUPS: string;
  BACKFILL_SCHEDULE: string;
}

export function tablesFor(schemaName: string): Tables {
  const S = schemaIdentifier(schemaName);
  return {
    S,
    EVENTS: `${S}.events`,
    RUNS: `${S}.handler_runs`,
    STEPS: `${S}.steps`,
    ACTIONS: `${S}.operator_actions`,
    DELIVERIES: `${S}.deliveries`,
    DELIVERY_COUNTS: `${S}.delivery_counts`,
    ATTEMPTS: `${S}.run_attempts`,
    VERSIONS: `${S}.object_versions`,
    HANDLERS: `${S}.handlers`,
    PAUSES: `${S}.pauses`,
    RATE_WINDOWS: `${S}.rate_windows`,
    HEALTH: `${S}.handler_health`,
    FAILURE_GROUPS: `${S}.failure_groups`,
    BACKFILL_SCHEDULE: `${S}.backfill_schedule`,
  };
}
