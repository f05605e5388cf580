/**
 * The operators' statements: re-drive and replay (guarded UPDATEs that never touch a run a
 * worker holds a live lease on: 0 rows = not in a state the action applies to, or leased), the
 * reads behind the events view, the API and the CLI, the gauges, and the handlers registry.
 * Plain text; execution is in ../operators.ts.
 */
import { DELIVERY_LOG_ROWS } from './claim.js';
import { eventColumns, runColumns, SOURCES_STORED } from '../columns.js';
import type { Tables } from '../tables.js';
import { attemptLogStatements } from './attempt-log.js';

export function operatorStatements(t: Tables) {
  const { EVENTS, RUNS, STEPS, ACTIONS, DELIVERIES, DELIVERY_COUNTS, ATTEMPTS, ATTEMPT_HISTORY, FAILURE_GROUPS, SCHEMA } = t;
  const { LOG_EXPIRED } = attemptLogStatements(t);

  /**
   * Deliveries of event `e`: with a counter row (its duplicates outgrew the log, or were
   * counted before migration 0020), its first (logged) and every duplicate (counted); else its
   * log's rows, every delivery.
   */
  const DELIVERY_TOTAL = `coalesce(
      (SELECT (SELECT count(*) FROM ${DELIVERIES} d WHERE d.event_row_id = e.id AND NOT d.duplicate) + dc.duplicates
         FROM ${DELIVERY_COUNTS} dc WHERE dc.event_row_id = e.id),
      (SELECT count(*) FROM ${DELIVERIES} d WHERE d.event_row_id = e.id))::int`;
  const DELIVERY_COUNT = `${DELIVERY_TOTAL} AS deliveries`;
  const RUNS_SUMMARY = `(SELECT coalesce(json_agg(json_build_object('id', r.id, 'handler', r.handler, 'state', r.state, 'attempts', r.attempts,
        'generation', r.generation, 'lastError', r.last_error, 'updatedAt', r.updated_at, 'waiting', r.waiting) ORDER BY r.handler), '[]')
      FROM ${RUNS} r WHERE r.event_row_id = e.id) AS runs`;

  /**
   * Run `r` is in a failure group: failed (a dead letter), or received again after a failed
   * attempt (retrying). Written as handler_runs_failing_idx's predicate and more, so that index
   * answers it.
   */
  const FAILING = `r.error_shape IS NOT NULL AND r.state IN ('failed', 'received') AND (r.state = 'failed' OR r.attempts > 0)`;
  /** Run `r`'s failure group: its handler and the shape of its last error (migrations/0012), as 12 hex digits. */
  const GROUP_ID = `left(md5(r.handler || chr(10) || r.error_shape), 12)`;

  return {
    /**
     * A backfill run, recorded as an operator action ($1 the source, $2 actor, $3 what ran: the
     * command line or the schedule, $4 its counts as JSON).
     */
    RECORD_BACKFILL: `INSERT INTO ${ACTIONS} (mode, target, actor, reason, detail)
       VALUES ('backfill', $1::text, $2::text, $3::text, $4::jsonb) RETURNING id`,

    /**
     * Re-drive ($1 event row, $2 handler or null for all, $3 actor, $4 reason): finish what was
     * started, with the SAME generation (same outbound keys, committed steps skipped). Applies to
     * runs that are `failed`, `received`, or `processing` with an expired lease. Attempts restart
     * from 0. The target rows are locked first (FOR UPDATE re-checks their state on the newest
     * version), so nothing returned comes from a stale snapshot.
     */
    // mutant: redrive-live-lease, redrive-attempt-unlogged
    REDRIVE_RUNS: `WITH target AS (
         SELECT id, state, lease_token, generation, attempts, attempt_started_at FROM ${RUNS}
          WHERE event_row_id = $1::bigint AND ($2::text IS NULL OR handler = $2::text)
            AND (state IN ('failed', 'received') OR (state = 'processing' AND lease_until < now()))
          FOR UPDATE
       ), moved AS (
         UPDATE ${RUNS} r
            SET state = 'received', attempts = 0, lease_token = NULL, lease_until = NULL,
                finished_at = NULL, updated_at = now()
           FROM target t WHERE r.id = t.id
         RETURNING r.id, r.handler, r.generation, t.state AS from_state
       ), event AS (
         UPDATE ${EVENTS} e
            SET runs_pending = e.runs_pending + x.failed, runs_failed = e.runs_failed - x.failed,
                state = 'processing', finished_at = NULL, updated_at = now()
           FROM (SELECT count(*) FILTER (WHERE from_state = 'failed')::int AS failed FROM moved) x
          WHERE e.id = $1::bigint AND EXISTS (SELECT 1 FROM moved)
         RETURNING e.provider, e.event_id
       ), audit AS (
         INSERT INTO ${ACTIONS} (event_row_id, run_id, mode, from_state, generation, actor, reason)
         SELECT $1::bigint, id, 'redrive', from_state, generation, $3::text, $4::text FROM moved
       ), ${
         // A run taken from an expired lease: that attempt logged (sql/attempt-log.ts).
         LOG_EXPIRED("target x WHERE x.state = 'processing'")
       }
       SELECT m.id AS "runId", m.handler, m.from_state AS "fromState", m.generation, ev.provider AS source, ev.event_id AS "eventId"
         FROM moved m, event ev`,

    /**
     * Replay ($1 event row, $2 handler, $3 steps to reuse, $4 actor, $5 reason, $6 detail): do it
     * again on purpose, as a NEW generation of one run (`done` or `failed`, never in flight). The
     * steps in $3 are copied into the new generation with their recorded results; every other
     * step runs again, and an external one gets a new idempotency key (the key includes the
     * generation). 0 rows = the run is not finished (or does not exist). A done run's last
     * attempt, which only its row held, is logged now (sql/attempt-log.ts), under a token of its
     * own (the attempt's was cleared at done): the history keeps the generation it ends.
     */
    // mutant: replay-reuses-nothing, replay-in-flight, replay-forgets-done-attempt
    REPLAY_RUN: `WITH target AS (
         SELECT id, state, generation, attempts, attempt_started_at, finished_at FROM ${RUNS}
          WHERE event_row_id = $1::bigint AND handler = $2::text AND state IN ('done', 'failed')
          FOR UPDATE
       ), moved AS (
         UPDATE ${RUNS} r
            SET state = 'received', generation = r.generation + 1, attempts = 0, last_error = NULL, error_shape = NULL,
                note = NULL, finished_at = NULL, updated_at = now()
           FROM target t WHERE r.id = t.id
         RETURNING r.id, r.handler, r.generation, t.state AS from_state, t.generation AS previous
       ), reused AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject, reused_from, completed_at)
         SELECT m.id, m.generation, s.name, s.kind, s.result, s.idempotency_key, s.key_subject, s.generation, s.completed_at
           FROM moved m JOIN ${STEPS} s ON s.run_id = m.id AND s.generation = m.previous
          WHERE s.name = ANY($3::text[])
       ), event AS (
         UPDATE ${EVENTS} e
            SET runs_pending = e.runs_pending + 1,
                runs_failed = e.runs_failed - (SELECT count(*) FROM moved WHERE from_state = 'failed')::int,
                state = 'processing', finished_at = NULL, updated_at = now()
          WHERE e.id = $1::bigint AND EXISTS (SELECT 1 FROM moved)
         RETURNING e.provider, e.event_id
       ), audit AS (
         INSERT INTO ${ACTIONS} (event_row_id, run_id, mode, from_state, generation, actor, reason, detail)
         SELECT $1::bigint, id, 'replay', from_state, generation, $4::text, $5::text, $6::jsonb FROM moved
       ), ended AS (
         INSERT INTO ${ATTEMPTS} (run_id, lease_token, generation, attempt, started_at, ended_at, outcome)
         SELECT id, gen_random_uuid(), generation, attempts, attempt_started_at, finished_at, 'done' FROM target
          WHERE state = 'done' AND attempt_started_at IS NOT NULL
       )
       SELECT m.id AS "runId", m.handler, m.from_state AS "fromState", m.generation, ev.provider AS source, ev.event_id AS "eventId"
         FROM moved m, event ev`,

    /** Events by state, provider, type, age and handler, newest first ($1-$6). */
    /**
     * The console's search (EventFilter; every condition given must hold, a null one is no
     * condition): $1 state, $2 providers (any of), $3 type, $4 received at least $4 s ago, $5
     * handler, $6 limit, $7 a run waiting for $7, $8 provider event id, $9 received since,
     * $10 received before, $11-$13 payload path, equals|contains, value, $14 failure group, $15
     * rows below this id (the next page), $16-$17 the row ids a time range lies in (ARRIVAL_ID).
     * Newest first by row id: the primary key answers the order and the page, so a page costs
     * the rows it reads, not the table's size. Sent unnamed,
     * so each search is planned with its values: a null condition is folded away and the planner
     * picks the index of the conditions given (docs/operating.md, "Searching events").
     */
    // mutant: search-page-overlap
    LIST_EVENTS: `SELECT e.id, e.provider AS source, e.event_id AS "eventId", e.type, e.state, e.note,
              e.received_at AS "receivedAt", e.updated_at AS "updatedAt", ${RUNS_SUMMARY}, ${DELIVERY_COUNT}
         FROM ${EVENTS} e
        WHERE ($1::text IS NULL OR e.state = $1::text)
          AND ($1::text IS DISTINCT FROM 'failed' OR e.id IN (SELECT r.event_row_id FROM ${RUNS} r WHERE r.state = 'failed'))
          AND ($2::text[] IS NULL OR e.provider = ANY($2::text[]))
          AND ($3::text IS NULL OR e.type = $3::text)
          AND ($4::int IS NULL OR e.received_at < now() - $4::int * interval '1 second')
          AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM ${RUNS} r WHERE r.event_row_id = e.id AND r.handler = $5::text))
          AND ($7::text IS NULL OR e.id IN (SELECT r.event_row_id FROM ${RUNS} r WHERE r.waiting = $7::text AND ($5::text IS NULL OR r.handler = $5::text)))
          AND ($8::text IS NULL OR e.event_id = $8::text)
          AND ($9::timestamptz IS NULL OR e.received_at >= $9::timestamptz)
          AND ($10::timestamptz IS NULL OR e.received_at < $10::timestamptz)
          AND ($11::text[] IS NULL OR CASE WHEN $12::text = 'equals' THEN e.payload #>> $11::text[] = $13::text
                ELSE strpos(lower(CASE WHEN cardinality($11::text[]) = 0 THEN e.payload::text ELSE e.payload #>> $11::text[] END), lower($13::text)) > 0 END)
          AND ($14::text IS NULL OR e.id IN (SELECT r.event_row_id FROM ${RUNS} r WHERE ${FAILING} AND ${GROUP_ID} = $14::text
                AND ($5::text IS NULL OR r.handler = $5::text)))
          AND ($15::bigint IS NULL OR e.id < $15::bigint)
          AND ($16::bigint IS NULL OR e.id >= $16::bigint)
          AND ($17::bigint IS NULL OR e.id < $17::bigint)
        ORDER BY e.id DESC
        LIMIT $6::int`,
    /** The id range of the events table ($1 ids from, inclusive): the ends of ARRIVAL_ID's search. */
    ID_RANGE: `SELECT (SELECT id FROM ${EVENTS} ORDER BY id LIMIT 1) AS lo, (SELECT id FROM ${EVENTS} ORDER BY id DESC LIMIT 1) AS hi`,
    /** The first row at or after id $1, and when it arrived (one probe of the primary key). */
    ARRIVAL_ID: `SELECT id, received_at AS "receivedAt" FROM ${EVENTS} WHERE id >= $1::bigint ORDER BY id LIMIT 1`,
    /** The sources events were stored under (columns.ts). */
    SOURCES: SOURCES_STORED(EVENTS),
    /**
     * Failure groups ($1 handler or null, $2 limit, $3 true: resolved groups too): the failed and
     * retrying runs grouped by handler and error shape, newest failure first, with how many of
     * each, when the group was first and last seen (its runs' last failures), a sample event and
     * message, and the resolution an operator recorded (a group whose runs all failed before it
     * is resolved; a later failure opens it again).
     */
    FAILURE_GROUPS: `WITH groups AS (
         SELECT r.handler, r.error_shape AS shape, count(*) FILTER (WHERE r.state = 'failed')::int AS failed,
                count(*) FILTER (WHERE r.state = 'received')::int AS retrying, min(r.updated_at) AS first_seen, max(r.updated_at) AS last_seen,
                (array_agg(r.event_row_id ORDER BY r.updated_at DESC))[1] AS sample_event
           FROM ${RUNS} r WHERE ${FAILING} AND ($1::text IS NULL OR r.handler = $1::text)
          GROUP BY r.handler, r.error_shape
       )
       SELECT left(md5(g.handler || chr(10) || g.shape), 12) AS id, g.handler, g.shape, g.failed, g.retrying,
              g.first_seen AS "firstSeen", g.last_seen AS "lastSeen", g.sample_event AS "sampleEvent",
              (SELECT s.last_error FROM ${RUNS} s WHERE s.event_row_id = g.sample_event AND s.handler = g.handler) AS "sampleError",
              res.resolved_at AS "resolvedAt", res.actor AS "resolvedBy", res.reason AS "resolution",
              (res.resolved_at IS NOT NULL AND g.last_seen <= res.resolved_at) AS resolved
         FROM groups g LEFT JOIN ${FAILURE_GROUPS} res ON res.handler = g.handler AND res.shape = g.shape
        WHERE $3::boolean OR res.resolved_at IS NULL OR g.last_seen > res.resolved_at
        ORDER BY g.last_seen DESC
        LIMIT $2::int`,
    /** Marks group $1 resolved (by $2, because $3): 0 rows = no failed or retrying run is in such a group. */
    RESOLVE_GROUP: `INSERT INTO ${FAILURE_GROUPS} AS res (handler, shape, resolved_at, actor, reason)
       SELECT r.handler, r.error_shape, now(), $2::text, $3::text FROM ${RUNS} r
        WHERE ${FAILING} AND ${GROUP_ID} = $1::text LIMIT 1
       ON CONFLICT (handler, shape) DO UPDATE SET resolved_at = now(), actor = EXCLUDED.actor, reason = EXCLUDED.reason
       RETURNING res.handler, res.shape, res.resolved_at AS "resolvedAt"`,
    /**
     * The reconciler leader's look at the groups (in its pass's transaction): a group with no
     * failing run left is closed; a group that is new, or fails again after it closed or after
     * its resolution, is (re)opened, to be counted and notified once. Returns the opened ones
     * with how many runs they hold and a sample message.
     */
    OPEN_FAILURE_GROUPS: `WITH current AS (
         SELECT r.handler, r.error_shape AS shape, count(*)::int AS runs, max(r.updated_at) AS last_seen,
                (array_agg(r.event_row_id ORDER BY r.updated_at DESC))[1] AS sample_event
           FROM ${RUNS} r WHERE ${FAILING} GROUP BY r.handler, r.error_shape
       ), closed AS (
         UPDATE ${FAILURE_GROUPS} g SET closed_at = now()
          WHERE g.closed_at IS NULL AND NOT EXISTS (SELECT 1 FROM current c WHERE c.handler = g.handler AND c.shape = g.shape)
       ), opened AS (
         INSERT INTO ${FAILURE_GROUPS} AS g (handler, shape)
         SELECT c.handler, c.shape FROM current c
         ON CONFLICT (handler, shape) DO UPDATE
            SET opened_at = now(), closed_at = NULL, notified_at = NULL, notify_attempts = 0, resolved_at = NULL, actor = NULL, reason = NULL
          WHERE g.closed_at IS NOT NULL
             OR g.resolved_at < (SELECT c.last_seen FROM current c WHERE c.handler = g.handler AND c.shape = g.shape)
         RETURNING g.handler, g.shape, g.opened_at
       )
       SELECT left(md5(o.handler || chr(10) || o.shape), 12) AS id, o.handler, o.shape, o.opened_at AS "openedAt", c.runs, c.sample_event AS "sampleEvent",
              (SELECT s.last_error FROM ${RUNS} s WHERE s.event_row_id = c.sample_event AND s.handler = c.handler) AS "sampleError"
         FROM opened o JOIN current c ON c.handler = o.handler AND c.shape = o.shape`,
    /** Opened groups not notified yet ($1 at most, $2 attempts at most), oldest first. */
    UNNOTIFIED_GROUPS: `SELECT left(md5(g.handler || chr(10) || g.shape), 12) AS id, g.handler, g.shape, g.opened_at AS "openedAt",
              (SELECT count(*)::int FROM ${RUNS} r WHERE r.handler = g.handler AND r.error_shape = g.shape AND ${FAILING}) AS runs
         FROM ${FAILURE_GROUPS} g
        WHERE g.notified_at IS NULL AND g.closed_at IS NULL AND g.notify_attempts < $2::int
        ORDER BY g.opened_at LIMIT $1::int`,
    /** One notification try of group ($1 handler, $2 shape, opened at $3, to the millisecond as JavaScript has it): $4 true = delivered. */
    // mutant: notified-without-delivery
    NOTIFY_TRIED: `UPDATE ${FAILURE_GROUPS} SET notify_attempts = notify_attempts + 1, notified_at = CASE WHEN $4::boolean THEN now() END
        WHERE handler = $1::text AND shape = $2::text AND date_trunc('milliseconds', opened_at) = $3::timestamptz AND notified_at IS NULL`,

    /**
     * The events of runs that look stuck: processing past their lease, or received untouched for
     * $1 ms ($2 limit). A run waiting for a pause or a slot waits on purpose (no job touches it
     * meanwhile); `oncehook_runs_waiting` counts those.
     */
    STUCK_RUN_EVENT_IDS: `SELECT DISTINCT r.event_row_id AS id FROM ${RUNS} r
        WHERE (r.state = 'processing' AND r.lease_until < now())
           OR (r.state = 'received' AND r.updated_at < now() - $1::int * interval '1 millisecond'
               AND r.waiting IS DISTINCT FROM 'paused' AND r.waiting IS DISTINCT FROM 'concurrency')
        LIMIT $2::int`,
    /** Summaries of the events $1. */
    EVENTS_BY_IDS: `SELECT e.id, e.provider AS source, e.event_id AS "eventId", e.type, e.state, e.note,
              e.received_at AS "receivedAt", e.updated_at AS "updatedAt", ${RUNS_SUMMARY}, ${DELIVERY_COUNT}
         FROM ${EVENTS} e WHERE e.id = ANY($1::bigint[]) ORDER BY e.updated_at`,

    GET_EVENT: `SELECT ${eventColumns('e')} FROM ${EVENTS} e WHERE e.id = $1::bigint`,
    GET_EVENT_BY_KEY: `SELECT ${eventColumns('e')} FROM ${EVENTS} e WHERE e.provider = $1::text AND e.event_id = $2::text`,
    GET_RUNS: `SELECT ${runColumns('r')} FROM ${RUNS} r WHERE r.event_row_id = $1::bigint ORDER BY r.handler`,
    /** Steps of one run ($1) and generation ($2), in the order they completed. */
    GET_STEPS: `SELECT name, kind, result, idempotency_key AS "idempotencyKey", key_subject AS "keySubject" FROM ${STEPS}
        WHERE run_id = $1::bigint AND generation = $2::int ORDER BY completed_at, name`,
    SHOW_STEPS: `SELECT s.run_id AS "runId", r.handler, s.generation, s.name, s.kind, s.result, s.idempotency_key AS "idempotencyKey",
              s.reused_from AS "reusedFrom", s.completed_at AS "completedAt"
         FROM ${STEPS} s JOIN ${RUNS} r ON r.id = s.run_id
        WHERE r.event_row_id = $1::bigint ORDER BY s.completed_at, s.generation`,
    SHOW_ACTIONS: `SELECT a.run_id AS "runId", r.handler, a.mode, a.from_state AS "fromState", a.generation, a.actor, a.reason, a.detail, a.created_at AS "createdAt"
         FROM ${ACTIONS} a LEFT JOIN ${RUNS} r ON r.id = a.run_id
        WHERE a.event_row_id = $1::bigint ORDER BY a.created_at`,
    /** The first DELIVERY_LOG_ROWS deliveries: the log keeps no more rows. */
    SHOW_DELIVERIES: `SELECT received_at AS "receivedAt", duplicate,
              CASE WHEN NOT duplicate THEN NULL WHEN same_body THEN 'body' ELSE 'id' END AS "matchedBy", same_body AS "sameBody"
         FROM ${DELIVERIES} WHERE event_row_id = $1::bigint ORDER BY received_at LIMIT ${DELIVERY_LOG_ROWS}`,
    SHOW_DELIVERY_TOTAL: `SELECT ${DELIVERY_TOTAL} AS total,
              coalesce((SELECT dc.last_at FROM ${DELIVERY_COUNTS} dc WHERE dc.event_row_id = e.id),
                       (SELECT max(d.received_at) FROM ${DELIVERIES} d WHERE d.event_row_id = e.id AND d.duplicate)) AS "lastAt"
         FROM ${EVENTS} e WHERE e.id = $1::bigint`,
    SHOW_ATTEMPTS: `SELECT a.run_id AS "runId", r.handler, a.generation, a.attempt, a.started_at AS "startedAt", a.ended_at AS "endedAt", a.outcome, a.error
         FROM ${ATTEMPT_HISTORY} a JOIN ${RUNS} r ON r.id = a.run_id
        WHERE r.event_row_id = $1::bigint ORDER BY a.started_at, a.attempt`,

    /** The gauges ($1 ms: stale; a run waiting for a pause or a slot is not stale, it waits on purpose). Each count is answered from a partial index, so the cost does not grow with the number of done events. */
    PENDING_COUNTS: `SELECT
         (SELECT count(*) FROM ${EVENTS} WHERE state = 'received')::int AS "eventsReceived",
         (SELECT count(*) FROM ${EVENTS} WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond')::int AS "eventsReceivedStale",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'received')::int AS "runsReceived",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
             AND waiting IS DISTINCT FROM 'paused' AND waiting IS DISTINCT FROM 'concurrency')::int AS "runsReceivedStale",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'processing')::int AS "runsProcessing",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'processing' AND lease_until < now())::int AS "runsProcessingExpired",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'failed')::int AS "runsFailed"`,

    /** Upserts what a worker loaded, at its start ($1-$5 arrays). */
    REGISTER_HANDLERS: `WITH registered AS (
         INSERT INTO ${SCHEMA}.handlers (name, source, kind, type, description, settings)
         SELECT n, s, k, t, d, j::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(n, s, k, t, d, j)
         ON CONFLICT (name) DO UPDATE
            SET source = excluded.source, kind = excluded.kind, type = excluded.type,
                description = excluded.description, settings = excluded.settings, last_seen_at = now()
       )
       INSERT INTO ${SCHEMA}.handler_workers (handler, worker) SELECT n, $7::text FROM unnest($1::text[]) AS u(n)
       ON CONFLICT (worker, handler) DO UPDATE SET started_at = now(), seen_at = now()`,
    LIST_HANDLERS: `SELECT name, source, kind, type, last_seen_at AS "lastSeenAt" FROM ${SCHEMA}.handlers ORDER BY name`,
    /** The registry with what each handler declares and the workers seen with it within $1 seconds. */
    HANDLER_REGISTRY: `SELECT h.name, h.source, h.kind, h.type, h.description, h.settings, h.first_seen_at AS "firstSeenAt", h.last_seen_at AS "lastSeenAt",
              coalesce((SELECT array_agg(w.worker ORDER BY w.worker) FROM ${SCHEMA}.handler_workers w
                         WHERE w.handler = h.name AND w.seen_at > now() - $1::int * interval '1 second'), '{}') AS workers
         FROM ${SCHEMA}.handlers h ORDER BY h.name`,
    /** A worker's pass: it is still there ($1 the worker). */
    WORKER_SEEN: `UPDATE ${SCHEMA}.handler_workers SET seen_at = now() WHERE worker = $1::text`,
    /** A worker stopping ($1), or the leader forgetting workers unseen for a day ($1 null). */
    FORGET_WORKERS: `DELETE FROM ${SCHEMA}.handler_workers WHERE worker = $1::text OR ($1::text IS NULL AND seen_at < now() - interval '1 day')`,
    /**
     * How each named handler (or destination, $1) is doing now: runs in progress, waiting
     * (received), dead letters (failed), its pause, the newest error among its pending and
     * failed runs. Reads only the partial indexes of pending and failed runs (small sets), never
     * the done ones.
     */
    HANDLER_STATES: `SELECT h AS handler,
              (SELECT count(*)::int FROM ${RUNS} r WHERE r.handler = h AND r.state = 'processing') AS "inFlight",
              (SELECT count(*)::int FROM ${RUNS} r WHERE r.handler = h AND r.state = 'received') AS waiting,
              (SELECT count(*)::int FROM ${RUNS} r WHERE r.handler = h AND r.state = 'failed') AS failed,
              (SELECT p.reason FROM ${SCHEMA}.pauses p WHERE p.scope = 'handler' AND p.name = h) AS paused,
              (SELECT r.last_error FROM ${RUNS} r WHERE r.handler = h AND r.state IN ('received', 'failed') AND r.last_error IS NOT NULL
                ORDER BY r.updated_at DESC LIMIT 1) AS "lastError"
         FROM unnest($1::text[]) AS h`,
  };
}
