/**
 * Flow control's statements (docs/flow-control.md): the concurrency slots, the rate windows,
 * waiting runs and their wake-ups, pauses and the circuit breaker. Every count is in Postgres,
 * beside the runs it limits. Plain text; execution is in ../flow.ts.
 */
import { PAUSED } from '../columns.js';
import type { Tables } from '../tables.js';
import { attemptLogStatements } from './attempt-log.js';

export function flowStatements(t: Tables) {
  const { SCHEMA, EVENTS, RUNS, PAUSES, RATE_WINDOWS, HEALTH, ACTIONS } = t;
  const { TAKEN_ATTEMPTS, LOG_TAKEN } = attemptLogStatements(t);

  /** A waiting run's job: what a resume or a wake-up enqueues (CTE `woken`, joined to its event `e`). */
  const WOKEN_JOB = `r.event_row_id AS "rowId", e.provider AS source, e.event_id AS "eventId", r.handler, r.generation, r.attempts AS attempt, r.waits AS wait`;

  return {
    /**
     * The slots in use of handler $1 (and concurrency key $2, when given): its runs in progress
     * under a live lease (flow_slots_in_use, migrations/0014, the one definition). Read without
     * the lock: a look, not a decision (the gate decides under the lock).
     */
    IN_FLIGHT: `SELECT ${SCHEMA}.flow_slots_in_use($1::text, $2::text) AS n`,

    /**
     * The gate of a transaction that holds the lock across round trips (a handler with a rate
     * limit too): the (handler, key) advisory lock $1 TRIED, then the slots of handler $2 (key
     * $3) counted in a snapshot taken after it was granted (flow_gate, migrations/0014). NULL =
     * another gate holds the lock.
     */
    GATE_TRY: `SELECT ${SCHEMA}.flow_gate($1::bigint, $2::text, $3::text, false) AS n`,

    /**
     * Takes one start in the current window of (handler $1, key $2): windows of $3 ms, at most
     * $4 starts each. One upsert under the row lock: a newer window restarts the count at 1; in
     * the same window the count goes up only while below the limit. A statement that computed
     * an OLDER window (its clock read before a racing one's, its upsert after) counts in the
     * current one: windows only move forward, or a late start would reset the count. 0 rows =
     * the window is full (the run waits for the next one). Inside the lease's transaction: if
     * the lease is then not taken, the rollback gives the start back.
     */
    // mutant: flow-rate-unchecked
    TAKE_RATE: `INSERT INTO ${RATE_WINDOWS} AS w (handler, rate_key, window_start, started)
       VALUES ($1::text, $2::text,
               to_timestamp(floor(extract(epoch FROM clock_timestamp()) * 1000 / $3::int) * $3::int / 1000.0), 1)
       ON CONFLICT (handler, rate_key) DO UPDATE
          SET started = CASE WHEN excluded.window_start > w.window_start THEN 1 ELSE w.started + 1 END,
              window_start = greatest(w.window_start, excluded.window_start)
        WHERE excluded.window_start > w.window_start OR w.started < $4::int
       RETURNING started`,

    /**
     * The run (event row $1, handler $2) waits for reason $3 (`concurrency`, `rate-limit`),
     * with concurrency key $4 and limit $6 (rate key $7): it stays (or goes back to)
     * `received`, not leased and not an attempt. For the rate, `ahead`: the runs of the same
     * handler and rate key that have waited longer (counted up to $8: a few windows' worth),
     * so the caller schedules its next look for the window its turn is expected in. Guarded by the job's fence $5 (the run's `waits` it was scheduled
     * with; NULL for a job from outside flow control): a stale job changes nothing. Bumps
     * `waits`: a run waiting for the rate gets the one next job with the new value; a run
     * waiting for a slot gets none (a run of its handler and key that ends wakes it). Keeps
     * `waiting_since` across waits: a run woken and held back again keeps its place in line.
     * 0 rows = not ours to touch (leased by a live worker, finished, or a newer job owns the
     * wait). A run taken from an expired lease has that attempt logged (attempt-log.ts).
     */
    // mutant: flow-wait-unfenced
    WAIT: `WITH ${TAKEN_ATTEMPTS('event_row_id = $1::bigint AND handler = $2::text')}, waited AS (
       UPDATE ${RUNS} r
          SET state = 'received', lease_token = NULL, lease_until = NULL,
              waiting = $3::text, waiting_since = coalesce(r.waiting_since, now()),
              waits = r.waits + 1, flow_key = $4::text, flow_limit = $6::int, rate_key = $7::text, updated_at = now()
        WHERE r.event_row_id = $1::bigint AND r.handler = $2::text
          AND (r.state = 'received' OR (r.state = 'processing' AND r.lease_until < now()))
          AND ($5::int IS NULL OR r.waits = $5::int)
       RETURNING r.id, r.waits, r.attempts, r.generation,
                 CASE WHEN $3::text = 'rate-limit' THEN (
                   SELECT count(*)::int FROM (
                     SELECT 1 FROM ${RUNS} w
                      WHERE w.handler = $2::text AND w.waiting = 'rate-limit' AND w.state = 'received'
                        AND w.rate_key IS NOT DISTINCT FROM $7::text AND w.waiting_since < coalesce(r.waiting_since, now())
                      LIMIT $8::int) ahead)
                 END AS ahead
       ), ${LOG_TAKEN('waited')}
       SELECT waits, attempts, generation, ahead FROM waited`,

    /**
     * A run that found its handler or source paused is marked so (event row $1, handler $2):
     * it waits for the resume, which enqueues it; no job polls it and the reconciler leaves it
     * alone. 0 rows = not paused (or not `received`): nothing to mark.
     */
    MARK_PAUSED: `UPDATE ${RUNS} r
          SET waiting = 'paused', waiting_since = coalesce(r.waiting_since, now()), updated_at = now()
         FROM ${EVENTS} e
        WHERE r.event_row_id = $1::bigint AND r.handler = $2::text AND e.id = r.event_row_id
          AND r.state = 'received' AND ${PAUSED(PAUSES, 'r', 'e')}`,

    /**
     * The next run waiting for a slot of (handler $1, key $2), the longest-waiting first: its
     * fence is bumped and its job is returned for the caller to run or enqueue now, at the front
     * of the queue (a slot was just freed, or looked free). SKIP LOCKED: two finishing runs wake
     * two different waiters at once. The woken run is no longer waiting (`waiting` NULL; it keeps
     * `waiting_since`, its place in line if its gate holds it back again): a run that frees the
     * other slot right after this commit, before the woken run's gate, wakes the NEXT waiter, not
     * this one a second time (whose second job would find it leased by the first and end that
     * slot's chain of hand-overs: measured, a 2-slot handler ran one run at a time). A woken run
     * whose job is lost is `received` and no longer a waiter: the reconciler re-enqueues it as a
     * run whose job was lost (STALE_RUNS). 0 rows = none waits.
     */
    // mutant: flow-woken-twice
    WAKE_NEXT: `UPDATE ${RUNS} r SET waits = r.waits + 1, waiting = NULL, updated_at = now()
         FROM ${EVENTS} e
        WHERE r.id = (SELECT id FROM ${RUNS}
                       WHERE handler = $1::text AND waiting = 'concurrency' AND state = 'received'
                         AND flow_key IS NOT DISTINCT FROM $2::text
                       ORDER BY waiting_since LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND e.id = r.event_row_id AND r.state = 'received'
       RETURNING ${WOKEN_JOB}`,

    /**
     * The reconciler's repair of waits nobody ends ($1 ms, $2 limit): in each (handler, key)
     * with waiters whose runs in progress under a live lease are fewer than its limit (the
     * `flow_limit` its waiters were held back by), as many of the longest waiters untouched for
     * $1 ms as there are free slots are woken (fence bumped, jobs returned). Such a group lost
     * its wake-up (the job lost with Redis, the finishing worker killed before it woke anyone, a
     * crashed holder whose lease ran out). A group whose slots are full waits on purpose: no
     * job, no write. 0 rows = nothing to repair. Reads every waiter's (handler, key) through the
     * partial index of waiting runs, and counts each group's slots through the in-flight index.
     */
    // mutant: stalled-slots-not-woken, stalled-slots-full-woken
    WAKE_STALLED: `WITH grp AS (
         SELECT handler, flow_key, max(flow_limit) AS lim
           FROM ${RUNS}
          WHERE waiting = 'concurrency' AND state = 'received'
          GROUP BY handler, flow_key
       ), free AS (
         SELECT g.handler, g.flow_key,
                coalesce(g.lim, 1) - (SELECT count(*) FROM ${RUNS} p
                                       WHERE p.handler = g.handler AND p.state = 'processing' AND p.lease_until > now()
                                         AND p.flow_key IS NOT DISTINCT FROM g.flow_key) AS n
           FROM grp g
       )
       UPDATE ${RUNS} r SET waits = r.waits + 1, updated_at = now()
         FROM ${EVENTS} e
        WHERE r.id = ANY(ARRAY(
                SELECT w.id FROM free f,
                       LATERAL (SELECT id FROM ${RUNS} x
                                 WHERE x.handler = f.handler AND x.waiting = 'concurrency' AND x.state = 'received'
                                   AND x.flow_key IS NOT DISTINCT FROM f.flow_key
                                   AND x.updated_at < now() - $1::int * interval '1 millisecond'
                                 ORDER BY x.waiting_since LIMIT greatest(f.n, 0) FOR UPDATE SKIP LOCKED) w
                 LIMIT $2::int))
          AND e.id = r.event_row_id AND r.state = 'received'
       RETURNING ${WOKEN_JOB}`,

    /**
     * Pause (scope $1 'handler' or 'source', name $2, reason $3, actor $4, $5 now: runs in
     * progress stop at their next step boundary too): recorded in `pauses` and as an operator
     * action. 0 rows = it was paused already (its first reason stays; a later --now still
     * applies: an operator may need to stop what runs after all).
     */
    PAUSE: `WITH paused AS (
         INSERT INTO ${PAUSES} AS p (scope, name, reason, actor, stop_now) VALUES ($1::text, $2::text, $3::text, $4::text, $5::boolean)
         ON CONFLICT (scope, name) DO UPDATE SET stop_now = true WHERE $5::boolean AND NOT p.stop_now
         RETURNING scope, name, reason, actor, stop_now, paused_at, xmax = 0 AS created
       ), audit AS (
         INSERT INTO ${ACTIONS} (mode, target, actor, reason, detail)
         SELECT 'pause', scope || ':' || name, $4::text, $3::text, json_build_object('now', stop_now) FROM paused
       )
       SELECT scope, name, reason, actor, stop_now AS "stopNow", paused_at AS "pausedAt", created FROM paused`,

    /**
     * Resume (scope $1, name $2, actor $3, reason $4): the pause row goes, recorded as an
     * operator action, and the handler's failure count restarts. 0 rows = it was not paused.
     */
    RESUME: `WITH gone AS (
         DELETE FROM ${PAUSES} WHERE scope = $1::text AND name = $2::text
         RETURNING scope, name, reason, actor, stop_now, paused_at
       ), health AS (
         UPDATE ${HEALTH} SET consecutive_failures = 0, updated_at = now()
          WHERE $1::text = 'handler' AND handler = $2::text AND EXISTS (SELECT 1 FROM gone)
       ), audit AS (
         INSERT INTO ${ACTIONS} (mode, target, actor, reason, detail)
         SELECT 'resume', scope || ':' || name, $3::text, $4::text, json_build_object('pausedFor', reason, 'pausedAt', paused_at) FROM gone
       )
       SELECT scope, name, reason, actor, stop_now AS "stopNow", paused_at AS "pausedAt" FROM gone`,

    /**
     * Up to $1 paused runs no pause covers any longer, released: no longer waiting, fence
     * bumped, their jobs returned to enqueue (they then start under their handler's limits).
     * Called in a loop after a resume until it returns fewer than $1; SKIP LOCKED: two resumes
     * at once release different runs.
     */
    RELEASE_PAUSED: `UPDATE ${RUNS} r SET waiting = NULL, waiting_since = NULL, waits = r.waits + 1, updated_at = now()
         FROM ${EVENTS} e
        WHERE r.id = ANY(ARRAY(
                SELECT x.id FROM ${RUNS} x JOIN ${EVENTS} xe ON xe.id = x.event_row_id
                 WHERE x.waiting = 'paused' AND x.state = 'received' AND NOT ${PAUSED(PAUSES, 'x', 'xe')}
                 ORDER BY x.waiting_since LIMIT $1::int FOR UPDATE OF x SKIP LOCKED))
          AND e.id = r.event_row_id AND r.state = 'received'
       RETURNING ${WOKEN_JOB}`,

    /** Everything paused, oldest first, with how many runs wait for it. */
    LIST_PAUSES: `SELECT p.scope, p.name, p.reason, p.actor, p.stop_now AS "stopNow", p.paused_at AS "pausedAt",
              (SELECT count(*)::int FROM ${RUNS} r JOIN ${EVENTS} e ON e.id = r.event_row_id
                WHERE r.waiting = 'paused' AND r.state = 'received'
                  AND ((p.scope = 'handler' AND r.handler = p.name) OR (p.scope = 'source' AND e.provider = p.name))) AS waiting
         FROM ${PAUSES} p ORDER BY p.paused_at`,

    /** Waiting runs by handler and reason (the gauge oncehook_runs_waiting). */
    WAITING_COUNTS: `SELECT handler, waiting, count(*)::int AS n FROM ${RUNS}
        WHERE waiting IS NOT NULL AND state = 'received' GROUP BY handler, waiting`,

    /**
     * A failed attempt of a breaker handler ($1 handler, $2 error): the count of failures in a
     * row goes up, returned with the new value.
     */
    RECORD_FAILURE: `INSERT INTO ${HEALTH} AS h (handler, consecutive_failures, last_error) VALUES ($1::text, 1, $2::text)
       ON CONFLICT (handler) DO UPDATE SET consecutive_failures = h.consecutive_failures + 1, last_error = $2::text, updated_at = now()
       RETURNING consecutive_failures AS failures`,

    /** A successful run of a breaker handler ($1): the count restarts (no write when it is 0 already). */
    RECORD_SUCCESS: `UPDATE ${HEALTH} SET consecutive_failures = 0, updated_at = now() WHERE handler = $1::text AND consecutive_failures <> 0`,

    /**
     * Priority aging: up to $3 runs of the lower-priority handlers $1, created more than $2 ms
     * ago and never started nor aged: fence bumped, their jobs returned for the reconciler to
     * enqueue WITHOUT priority (the front of the queue). Once per run (waits = 0 -> 1).
     */
    AGED_RUNS: `UPDATE ${RUNS} r SET waits = r.waits + 1, updated_at = now()
         FROM ${EVENTS} e
        WHERE r.id = ANY(ARRAY(
                SELECT id FROM ${RUNS}
                 WHERE handler = ANY($1::text[]) AND state = 'received' AND waiting IS NULL AND attempts = 0 AND waits = 0
                   AND created_at < now() - $2::int * interval '1 millisecond'
                 ORDER BY created_at LIMIT $3::int FOR UPDATE SKIP LOCKED))
          AND e.id = r.event_row_id AND r.state = 'received'
       RETURNING ${WOKEN_JOB}`,
  };
}
