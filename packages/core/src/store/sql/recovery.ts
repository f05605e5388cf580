/**
 * The reconciler's and retention's statements: expired leases back to `received`, lost jobs
 * found again, and the two retention horizons. Each takes a bounded batch (LIMIT, SKIP LOCKED:
 * never waits behind a worker's step) and is exported so tests can EXPLAIN it. Plain text;
 * execution is in ../recovery.ts.
 */
import { SOURCES_STORED } from '../columns.js';
import type { Tables } from '../tables.js';
import { attemptLogStatements } from './attempt-log.js';

export function recoveryStatements(t: Tables) {
  const { EVENTS, RUNS, DELIVERIES, DELIVERY_COUNTS, SCHEMA } = t;
  const { LOG_EXPIRED } = attemptLogStatements(t);
  return {
    /**
     * processing -> received for runs whose lease expired ($1 limit): the worker died or hung.
     * Clearing the token fences the old holder out; the caller enqueues each run's next attempt.
     * The attempt the dead worker started stays counted, so a run that kills its worker every
     * time still reaches `failed`, and is logged (the run row is no longer its attempt's).
     */
    // mutant: reconciler-expired-leases, reconciler-attempt-unlogged
    EXPIRED_LEASES: `WITH expired AS MATERIALIZED (
         SELECT id, lease_token, generation, attempts, attempt_started_at FROM ${RUNS}
          WHERE state = 'processing' AND lease_until < now()
          ORDER BY lease_until
          LIMIT $1::int
          FOR UPDATE SKIP LOCKED
       ), moved AS (
         UPDATE ${RUNS} r
            SET state = 'received', lease_token = NULL, lease_until = NULL, updated_at = now(),
                last_error = 'lease expired during attempt ' || r.attempts || ' (worker crashed or hung)',
                error_shape = ${SCHEMA}.error_shape('lease expired during attempt ' || r.attempts || ' (worker crashed or hung)')
           FROM expired x, ${EVENTS} e
          WHERE r.id = x.id AND r.state = 'processing' AND r.lease_until < now() AND e.id = r.event_row_id
         RETURNING r.id, r.event_row_id AS "rowId", e.provider AS source, e.event_id AS "eventId", r.handler, r.generation, r.attempts AS attempt
       ), ${
         // The attempt that died, logged (attempt-log.ts): the rows were locked by the CTE
         // expired, so its values are the newest.
         LOG_EXPIRED('expired x JOIN moved m ON m.id = x.id')
       }
       SELECT "rowId", source, "eventId", handler, generation, attempt FROM moved`,

    /**
     * `received` runs untouched for $1 ms ($2 limit): their job was lost (Redis flushed or
     * failed over) or sits behind a backlog. Touches updated_at on the runs it returns, so the
     * same run is re-enqueued at most once per threshold. Not a paused run: it has no job on
     * purpose (the resume enqueues it). Not a run waiting for a slot: it has no job on purpose
     * either (a run of its handler and key that ends wakes it; WAKE_STALLED repairs a group
     * whose wake-up was lost), and re-enqueuing every waiter of a backlog each threshold would
     * only queue jobs that wait again. A run waiting for the rate is touched by every poll, so
     * it is stale only when its polling job was lost; the job carries its `waits` (the fence),
     * so it continues the chain instead of starting a second one.
     */
    // mutant: reconciler-stale-runs, slot-waiters-requeued, paused-runs-requeued
    STALE_RUNS: `UPDATE ${RUNS} r SET updated_at = now()
       FROM ${EVENTS} e
      WHERE r.id = ANY(ARRAY(
        SELECT id FROM ${RUNS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
           AND waiting IS DISTINCT FROM 'paused'
           AND waiting IS DISTINCT FROM 'concurrency'
         ORDER BY updated_at
         LIMIT $2::int
         FOR UPDATE SKIP LOCKED))
        AND r.state = 'received' AND e.id = r.event_row_id
      RETURNING r.event_row_id AS "rowId", e.provider AS source, e.event_id AS "eventId", r.handler, r.generation, r.attempts AS attempt,
                CASE WHEN r.waiting IS NOT NULL THEN r.waits END AS wait`,

    /**
     * Events claimed but never dispatched (ingest died between commit and enqueue, Redis lost the
     * job) and untouched for $1 ms ($2 limit); touched, so each is re-enqueued once per threshold.
     */
    // mutant: reconciler-stale-events
    STALE_EVENTS: `UPDATE ${EVENTS} SET updated_at = now()
      WHERE id = ANY(ARRAY(
        SELECT id FROM ${EVENTS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
         ORDER BY updated_at
         LIMIT $2::int
         FOR UPDATE SKIP LOCKED))
        AND state = 'received'
      RETURNING id AS "rowId", provider AS source, event_id AS "eventId", kind, type, 0 AS attempt`,

    /** The sources events were stored under (columns.ts). */
    SOURCES: SOURCES_STORED(EVENTS),

    /**
     * One batch of one provider's done events ($1) received more than $2 days ago, oldest first
     * ($3 limit; runs, steps and operator actions cascade). Failed events are never deleted: they
     * are dead letters waiting for a human. `id = ANY(ARRAY(subquery))`, not `id IN (subquery)`:
     * the planner then touches the batch's rows by primary key instead of hash-joining it
     * against a scan of the whole table.
     */
    RETENTION_DELETE: `DELETE FROM ${EVENTS}
      WHERE id = ANY(ARRAY(
        SELECT id FROM ${EVENTS}
         WHERE provider = $1::text AND state = 'done'
           AND received_at < now() - $2::int * interval '1 day'
         ORDER BY received_at
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED))`,

    /**
     * One batch past the payload horizon ($1 provider, $2 days, $3 limit): the oldest done events
     * with a payload (SKIP LOCKED) lose their runs (steps, attempts and operator actions
     * cascade), their delivery log and counts, and the event row keeps only its key, type,
     * state and times.
     */
    // mutant: prune-deletes-key
    RETENTION_PRUNE: `WITH batch AS (
        SELECT id FROM ${EVENTS}
         WHERE provider = $1::text AND state = 'done' AND pruned_at IS NULL
           AND received_at < now() - $2::int * interval '1 day'
         ORDER BY received_at
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED
      ), runs_gone AS (
        DELETE FROM ${RUNS} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      ), deliveries_gone AS (
        DELETE FROM ${DELIVERIES} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      ), counts_gone AS (
        DELETE FROM ${DELIVERY_COUNTS} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      )
      UPDATE ${EVENTS} SET payload = NULL, meta = '{}', note = NULL, pruned_at = now()
       WHERE id = ANY(ARRAY(SELECT id FROM batch))`,
  };
}
