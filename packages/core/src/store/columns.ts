/**
 * Column lists and expressions the statements share (row shapes: rows.ts decodes them).
 */

/**
 * Numbers a JavaScript double cannot hold (beyond +-1.8e308, or so small it reads as 0): jsonb
 * keeps them exactly and prints them written out in full (1e131071: 131,072 digits per read),
 * and no handler could have used them. The edge refuses them since migration 0008
 * (payload-limits.ts in @oncehook/shared); this finds them in payloads stored before, without
 * printing them.
 */
const UNREADABLE_NUMBERS_PATH = `strict $.** ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308 || (@ != 0 && @ < 4.9e-324 && @ > -4.9e-324)))`;

/**
 * True for a stored payload no process may read: from before the payload limits (no
 * payload_bytes) and holding such a number. Checked in the database on every read of the
 * payload, so the poison is never printed; for rows stored since 0008 it is one NULL test.
 */
export const UNREADABLE_PAYLOAD = (alias: string) =>
  `(${alias}.payload_bytes IS NULL AND ${alias}.payload IS NOT NULL AND jsonb_path_exists(${alias}.payload, '${UNREADABLE_NUMBERS_PATH}'))`;

/**
 * The sources events were stored under, as `source`: a loose index scan of events_key, one
 * probe per source, not a scan of the events.
 */
export const SOURCES_STORED = (events: string) => `WITH RECURSIVE p AS (
         (SELECT provider FROM ${events} ORDER BY provider LIMIT 1)
         UNION ALL
         SELECT (SELECT e.provider FROM ${events} e WHERE e.provider > p.provider ORDER BY e.provider LIMIT 1) FROM p WHERE p.provider IS NOT NULL
       ) SELECT provider AS source FROM p WHERE provider IS NOT NULL`;

/** An event row (EventRow), the payload only when it can be read (UNREADABLE_PAYLOAD). */
export function eventColumns(alias: string): string {
  // mutant: unreadable-payload-returned
  return `${alias}.id, ${alias}.provider AS source, ${alias}.kind, ${alias}.event_id AS "eventId", ${alias}.type,
    CASE WHEN ${UNREADABLE_PAYLOAD(alias)} THEN NULL ELSE ${alias}.payload END AS payload, ${UNREADABLE_PAYLOAD(alias)} AS "payloadUnreadable",
    ${alias}.signed_at AS "signedAt", ${alias}.meta, ${alias}.state, ${alias}.runs_pending AS "runsPending",
    ${alias}.runs_failed AS "runsFailed", ${alias}.note, ${alias}.received_at AS "receivedAt",
    ${alias}.updated_at AS "updatedAt", ${alias}.finished_at AS "finishedAt", ${alias}.trace_parent AS "traceParent",
    ${alias}.pruned_at AS "prunedAt", ${alias}.origin, ${alias}.origin_detail AS "originDetail"`;
}

/** A handler run (RunRow). */
export function runColumns(alias: string): string {
  return `${alias}.id, ${alias}.event_row_id AS "eventRowId", ${alias}.handler, ${alias}.state, ${alias}.attempts,
    ${alias}.generation, ${alias}.key_scheme AS "keyScheme", ${alias}.lease_token AS "leaseToken",
    ${alias}.lease_until AS "leaseUntil", ${alias}.last_error AS "lastError", ${alias}.note,
    ${alias}.created_at AS "createdAt", ${alias}.updated_at AS "updatedAt", ${alias}.finished_at AS "finishedAt",
    ${alias}.waiting, ${alias}.waiting_since AS "waitingSince", ${alias}.waits`;
}

/**
 * The event's new state after its counters change by (dPending, dFailed), as SQL over the
 * row's current values (which, in an UPDATE that waited for a lock, are the newest ones).
 */
export const EVENT_STATE_AFTER = (dPending: string, dFailed: string) => `CASE
      WHEN e.runs_pending + ${dPending} > 0 THEN 'processing'
      WHEN e.runs_failed + ${dFailed} > 0 THEN 'failed'
      ELSE 'done' END`;

/**
 * True when run `r` of event `e` may not start: its handler or its event's source is paused
 * (flow control; the pauses table is tiny and read by primary key).
 */
export const PAUSED = (pauses: string, run: string, event: string) =>
  `EXISTS (SELECT 1 FROM ${pauses} p WHERE (p.scope = 'handler' AND p.name = ${run}.handler) OR (p.scope = 'source' AND p.name = ${event}.provider))`;

/**
 * True when run `r` must stop at its next step boundary: its handler or its event's source is
 * paused with `--now` (the event's source is read only when such a pause exists).
 */
export const STOP_NOW = (pauses: string, events: string, run: string) =>
  `EXISTS (SELECT 1 FROM ${pauses} p WHERE p.stop_now AND ((p.scope = 'handler' AND p.name = ${run}.handler) OR (p.scope = 'source' AND p.name = (SELECT se.provider FROM ${events} se WHERE se.id = ${run}.event_row_id))))`;
