/**
 * The worker's statements: dispatch, leases and the fence, run transitions, recorded steps,
 * per-object ordering and locks. Each guarded UPDATE says what a 0-row result means: that is
 * where the exactly-once logic lives. Plain text; execution is in ../runs.ts.
 *
 * Run transitions and the event's state: every statement that moves a run in or out of
 * "pending" (received/processing) or `failed` also updates the event's counters and state in
 * the SAME statement: `WITH run AS (UPDATE handler_runs ... RETURNING ...) UPDATE events SET
 * runs_pending = runs_pending + d, state = CASE ... END FROM run`. Two runs of one event
 * finishing at once serialize on the event row, and the second re-evaluates its SET on the
 * row the first committed, so the event is `done` exactly when its last run is.
 */
import { EVENT_STATE_AFTER, eventColumns, PAUSED, runColumns, STOP_NOW } from '../columns.js';
import type { Tables } from '../tables.js';
import { attemptLogStatements } from './attempt-log.js';

export function runStatements(t: Tables) {
  const { EVENTS, RUNS, STEPS, VERSIONS, PAUSES, SCHEMA } = t;

  const { ENDED_ATTEMPT, DONE_ATTEMPT, TAKEN_ATTEMPTS, LOG_TAKEN } = attemptLogStatements(t);

  /**
   * What a lease statement returns: the run, its event and its recorded steps (of its current
   * generation). The steps through `leased_steps` (migrations/0021), a VOLATILE function: its
   * query takes a snapshot of its own when the RETURNING runs, after the run row's lock was
   * granted. Never a subquery of the statement: the UPDATE that takes an expired lease may have
   * waited on the row lock of the previous owner's step transaction (the fence, FOR NO KEY
   * UPDATE); when that transaction commits, the UPDATE re-checks its WHERE on the newest row
   * version and takes the lease, but a subquery still reads with the statement's snapshot, taken
   * BEFORE that commit: the step just committed is invisible, and the new owner would run it
   * again (an external call made twice). The function's snapshot sees every step committed
   * before our lease, and none can be committed after it: the old owner's fence now fails on the
   * token.
   */
  // mutant: acquire-steps-in-returning
  const LEASED_RUN_RETURNING = `${runColumns('r')}, row_to_json((SELECT x FROM (SELECT ${eventColumns('e')}) x)) AS event, ${SCHEMA}.leased_steps(r.id, r.generation) AS steps`;

  /** The event's counters and state after one of its runs finished `done` (CTE `run` returning event_row_id). */
  // mutant: event-state-counters
  const EVENT_AFTER_RUN_DONE = `UPDATE ${EVENTS} e
          SET runs_pending = e.runs_pending - 1, state = ${EVENT_STATE_AFTER('-1', '0')},
              finished_at = CASE WHEN e.runs_pending - 1 = 0 THEN now() END, updated_at = now()
         FROM run WHERE e.id = run.event_row_id`;

  /**
   * processing -> done for the run of a step just recorded (CTE `step` returning run_id; $2 our
   * token), its attempt's verdict and its event's counters: the CTEs `run`, `verdict`, `event`.
   */
  const DONE_AFTER_STEP = `run AS (
         UPDATE ${RUNS}
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
          WHERE id = (SELECT run_id FROM step) AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id, attempt_started_at
       ), ${DONE_ATTEMPT()}, event AS (
         ${EVENT_AFTER_RUN_DONE}
         RETURNING e.id
       )`;

  /**
   * The events of the runs a batch just marked done (CTE `run` returning event_row_id), as CTEs
   * `finished`, `locked`, `event`: each event's counters moved by the number of its runs done
   * there (two handlers of one event can finish in one batch). Shared by MARK_RUNS_DONE and
   * RECORD_EXTERNAL_STEPS (their `final` records).
   *
   * Lock order. The run rows are each held by one worker's lease, so two batches never share
   * one; the event rows are shared (runs of one event on two workers, each in its own batch),
   * so they are locked in id order (`locked`, FOR NO KEY UPDATE, the UPDATE's own lock) before
   * any is updated: two batches wait for each other instead of deadlocking. Every statement
   * that changes a run and its event locks the run first, as these do.
   */
  // mutant: done-batch-counts-once, done-batch-lock-order
  const EVENTS_AFTER_RUNS_DONE = `finished AS (
         SELECT event_row_id, count(*)::int AS n FROM run GROUP BY event_row_id
       ), locked AS (
         SELECT e.id FROM ${EVENTS} e WHERE e.id IN (SELECT event_row_id FROM finished) ORDER BY e.id FOR NO KEY UPDATE
       ), event AS (
         UPDATE ${EVENTS} e
            SET runs_pending = e.runs_pending - f.n, state = ${EVENT_STATE_AFTER('- f.n', '0')},
                finished_at = CASE WHEN e.runs_pending - f.n = 0 THEN now() END, updated_at = now()
           FROM finished f WHERE e.id = f.event_row_id AND e.id IN (SELECT id FROM locked)
       )`;

  /**
   * A dispatch's runs, from the CTE `planned` (event_row_id, handler, token, paused, leased):
   * created (CTE `created`, returning each run), leased to their tokens or not (a leased run's
   * attempt starts now, in its row). `leaseMs`: the parameter holding the lease's length.
   */
  const DISPATCHED_RUNS = (leaseMs: string) => `created AS (
         INSERT INTO ${RUNS} AS r (event_row_id, handler, state, attempts, lease_token, lease_until, attempt_started_at, waiting, waiting_since)
         SELECT event_row_id, handler, CASE WHEN leased THEN 'processing' ELSE 'received' END, CASE WHEN leased THEN 1 ELSE 0 END,
                CASE WHEN leased THEN token END, CASE WHEN leased THEN now() + ${leaseMs}::int * interval '1 millisecond' END,
                CASE WHEN leased THEN now() END, CASE WHEN paused THEN 'paused' END, CASE WHEN paused THEN now() END
           FROM planned
         ON CONFLICT (event_row_id, handler) DO NOTHING
         RETURNING ${runColumns('r')}
       )`;

  /**
   * What every lease of an existing run writes (run `r`; `token` and `leaseMs` its parameters):
   * processing under a fresh token, an attempt counted and started, no longer waiting.
   */
  // mutant: cap-count
  const LEASE_SET = (token: string, leaseMs: string) => `state = 'processing', lease_token = ${token}::uuid,
                lease_until = now() + ${leaseMs}::int * interval '1 millisecond',
                attempts = r.attempts + 1, attempt_started_at = now(), updated_at = now(),
                waiting = NULL, waiting_since = NULL`;

  /** ACQUIRE_RUN's lease CTEs (`taken`, `leased`, `lost`), with `extra` (AND ...) added to its guard. */
  // mutant: pause-unchecked-lease
  const LEASE_ONE_RUN = (extra: string) => `${TAKEN_ATTEMPTS('event_row_id = $1::bigint AND handler = $2::text')}, leased AS (
         UPDATE ${RUNS} r
            SET ${LEASE_SET('$3', '$4')}, flow_key = $5::text
           FROM ${EVENTS} e
          WHERE r.event_row_id = $1::bigint AND r.handler = $2::text AND e.id = r.event_row_id
            AND (r.state = 'received' OR (r.state = 'processing' AND r.lease_until < now()))
            AND NOT ${PAUSED(PAUSES, 'r', 'e')} ${extra}
         RETURNING ${LEASED_RUN_RETURNING}
       ), ${LOG_TAKEN('leased')}`;

  return {
    /**
     * Dispatch: received -> processing, creating one run per handler AND leasing them to the
     * caller, in one statement (a leased run starts `processing`, attempt 1, with its own token;
     * $1 event row, $2 handlers, $3 tokens, $4 lease ms, $5 traceparent, $6 deferred). Not
     * leased, created `received` instead: a deferred run ($6 true: its handler has a limit the
     * caller checks next, or a lower priority, so it gets a job of its own), and a run whose
     * handler or source is paused (waiting `paused`: the resume enqueues it). 0 rows = the event
     * is not `received` (already dispatched, finished, or gone). Two workers dispatching at once
     * serialize on the event row; the second finds it `processing`.
     *
     * The arrays are read through `args` (a materialized CTE) so that this named statement is
     * planned ONCE per connection. Postgres plans a prepared statement's first 5 executions for
     * their values, then keeps its generic plan only if that costs no more than they did. With
     * the arrays in unnest() directly, a plan for the values counted their 1-3 handlers and the
     * generic plan assumed 10: the same plan priced 9x (749 against 82), so every dispatch was
     * planned again (pg_prepared_statements: 0 generic plans in 40 executions; planning was
     * about a fifth of Postgres's CPU in a perf profile of the end-to-end bench). Behind the
     * CTE both estimates are 10 and the generic plan is kept from the 6th execution on
     * (test/round-trips.test.ts checks the hot paths' named statements).
     */
    // mutant: dispatch-twice, dispatch-replanned, trace-not-on-event
    // mutant: pause-unchecked-dispatch
    DISPATCH_AND_LEASE: `WITH ev AS (
         UPDATE ${EVENTS} SET state = 'processing', runs_pending = cardinality($2::text[]), updated_at = now(),
                trace_parent = coalesce($5::text, trace_parent)
          WHERE id = $1::bigint AND state = 'received'
         RETURNING *
       ), args AS MATERIALIZED (
         SELECT $2::text[] AS handlers, $3::uuid[] AS tokens, $6::bool[] AS deferred
       ), planned AS (
         SELECT ev.id AS event_row_id, h.handler, h.token, p.paused, NOT (h.deferred OR p.paused) AS leased
           FROM ev, args, unnest(args.handlers, args.tokens, args.deferred) AS h(handler, token, deferred),
                LATERAL (SELECT ${PAUSED(PAUSES, 'h', 'ev')} AS paused) p
       ), ${DISPATCHED_RUNS('$4')}
       SELECT (SELECT row_to_json(x) FROM (SELECT ${eventColumns('ev')} FROM ev) x) AS event,
              (SELECT json_agg(c) FROM created c) AS runs
        WHERE EXISTS (SELECT 1 FROM ev)`,

    /**
     * DISPATCH_AND_LEASE for several events in ONE statement (dispatch-batcher.ts: the dispatches
     * of jobs that arrived while an earlier one was in flight). Per event ($1 distinct event rows,
     * $2 its count of runs, $3 its traceparent) and per run, flattened ($4 its event row, $5
     * handler, $6 token, $7 deferred); $8 lease ms. Each event exactly as DISPATCH_AND_LEASE
     * would do it alone, and one row per event dispatched; an event missing from the result is
     * not `received` (its caller looks for claimable runs). All or nothing: one commit for all.
     *
     * The events are locked in id order first (`locked`, FOR UPDATE), so two batches holding
     * the same events (a repeated job) wait for each other instead of deadlocking; the UPDATE
     * then only touches rows this statement holds. `received` is checked again under the lock
     * (READ COMMITTED re-reads a row that changed while we waited for it).
     */
    // mutant: dispatch-batch-twice, dispatch-batch-lock-order, pause-unchecked-batch-dispatch
    DISPATCH_AND_LEASE_MANY: `WITH event_args AS MATERIALIZED (
         SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[]) AS a(id, runs, trace)
       ), run_args AS MATERIALIZED (
         SELECT * FROM unnest($4::bigint[], $5::text[], $6::uuid[], $7::bool[]) AS ra(event_row_id, handler, token, deferred)
       ), locked AS MATERIALIZED (
         SELECT e.id FROM ${EVENTS} e
          WHERE e.id IN (SELECT id FROM event_args) AND e.state = 'received'
          ORDER BY e.id FOR UPDATE
       ), ev AS (
         UPDATE ${EVENTS} e SET state = 'processing', runs_pending = a.runs, updated_at = now(),
                trace_parent = coalesce(a.trace, e.trace_parent)
           FROM locked l JOIN event_args a ON a.id = l.id
          WHERE e.id = l.id AND e.state = 'received'
         RETURNING e.*
       ), planned AS (
         SELECT ev.id AS event_row_id, ra.handler, ra.token, p.paused, NOT (ra.deferred OR p.paused) AS leased
           FROM ev JOIN run_args ra ON ra.event_row_id = ev.id,
                LATERAL (SELECT ${PAUSED(PAUSES, 'ra', 'ev')} AS paused) p
       ), ${DISPATCHED_RUNS('$8')}
       SELECT ev.id AS "rowId", (SELECT row_to_json(x) FROM (SELECT ${eventColumns('ev')}) x) AS event,
              (SELECT json_agg(c) FROM created c WHERE c."eventRowId" = ev.id) AS runs
         FROM ev`,

    /** An event with no handler: received -> done or failed with a note. 0 rows = dispatched or finished meanwhile. */
    FINISH_UNHANDLED: `UPDATE ${EVENTS} SET state = $2::text, note = $3::text, finished_at = now(), updated_at = now()
        WHERE id = $1::bigint AND state = 'received'`,

    /**
     * The guarded claim of one run ($1 event row, $2 handler, $3 token, $4 lease ms, $5 its
     * concurrency key or NULL): received -> processing, or take over a processing run whose
     * lease expired. A fresh token fences out the previous holder; the attempt is counted; a
     * wait ends. Not while the handler or the event's source is paused. 0 rows = not ours to
     * run: done or failed, another worker holds a live lease, paused, or no such run. A limited
     * handler's runs take it inside the gate's transaction (flow.ts), after their slot.
     */
    ACQUIRE_RUN: `WITH ${LEASE_ONE_RUN('')} SELECT * FROM leased`,

    /**
     * ACQUIRE_RUN for a concurrency-limited handler, its slot taken in the same statement ($6 the
     * (handler, key) advisory lock, $7 the limit): the CTE `gate` queues for the lock and counts
     * the slots in use (flow_gate, migrations/0014: its count takes a snapshot of its own, after
     * the lock was granted), and the lease is taken only below the limit. Run alone (autocommit):
     * the lock is held until this statement's commit makes the lease visible to the next gate's
     * count, with no client round trip in between, so gates of one (handler, key) queue for a
     * fraction of a millisecond each. One row always: `slotsInUse`, and the leased run's columns
     * (NULL when not leased: full if slotsInUse >= $7, otherwise not ours to run).
     */
    // mutant: flow-slot-statement-snapshot, flow-concurrency-ignored
    ACQUIRE_GATED_RUN: `WITH gate AS MATERIALIZED (
         SELECT ${SCHEMA}.flow_gate($6::bigint, $2::text, $5::text, true) AS in_use
       ), ${LEASE_ONE_RUN('AND (SELECT in_use FROM gate) < $7::int')}
       SELECT g.in_use AS "slotsInUse", leased.* FROM gate g LEFT JOIN leased ON true`,

    /**
     * A freed slot handed over: the run waiting longest for a slot of (handler $1, key $2) is
     * leased in the wake-up itself ($3 the (handler, key) advisory lock, $4 the limit, $5 token,
     * $6 lease ms), for a worker that runs it at once in the job that freed the slot
     * (event-worker.ts). One statement where the wake-up (WAKE_NEXT) and the woken run's gate
     * (ACQUIRE_GATED_RUN) were two, and one row version of the run where they wrote two. The
     * gate is ACQUIRE_GATED_RUN's: the lock queued for, the slots counted in a snapshot taken
     * after it was granted, held until this statement's commit makes the lease visible.
     * - Full (a new run took the freed slot first): no waiter is touched. Every run in a slot
     *   hands it over when it ends, and the reconciler wakes a group whose hand-over was lost
     *   (WAKE_STALLED).
     * - The longest waiter (FOR UPDATE SKIP LOCKED: re-checked on its newest version, so one
     *   woken or leased since this statement's snapshot is passed over) is leased as the gate's
     *   lease would (an attempt; no longer waiting; `waits` bumped: any job it had is stale).
     *   Not while its handler or source is paused: `waiterId` is returned without a lease, and
     *   the caller wakes it as before (WAKE_NEXT; its job finds the pause and marks it).
     * A waiter whose wait committed after this statement's snapshot is not seen: its own second
     * look at the slots after its commit (process-event.ts gatedRun) finds the slot free.
     * One row always: `slotsInUse` (before this lease), `waiterId` (NULL: none waits, or full)
     * and the leased run's columns (NULL when none was leased).
     */
    // mutant: flow-hand-over-over-limit
    LEASE_NEXT_WAITER: `WITH gate AS MATERIALIZED (
         SELECT ${SCHEMA}.flow_gate($3::bigint, $1::text, $2::text, true) AS in_use
       ), next AS MATERIALIZED (
         SELECT x.id FROM ${RUNS} x
          WHERE x.handler = $1::text AND x.waiting = 'concurrency' AND x.state = 'received'
            AND x.flow_key IS NOT DISTINCT FROM $2::text
            AND (SELECT in_use FROM gate) < $4::int
          ORDER BY x.waiting_since LIMIT 1 FOR UPDATE SKIP LOCKED
       ), leased AS (
         UPDATE ${RUNS} r
            SET ${LEASE_SET('$5', '$6')}, waits = r.waits + 1
           FROM ${EVENTS} e
          WHERE r.id = (SELECT id FROM next) AND e.id = r.event_row_id AND r.state = 'received'
            AND NOT ${PAUSED(PAUSES, 'r', 'e')}
         RETURNING ${LEASED_RUN_RETURNING}
       )
       SELECT g.in_use AS "slotsInUse", (SELECT id FROM next) AS "waiterId", leased.* FROM gate g LEFT JOIN leased ON true`,

    /**
     * Every claimable run of an event ($1 event row, $2 token, $3 lease ms), for a repeated
     * dispatch job; same guard, per run, except the handlers in $4 (limited or lower-priority:
     * the caller takes each through its own path).
     */
    ACQUIRE_CLAIMABLE_RUNS: `WITH ${TAKEN_ATTEMPTS('event_row_id = $1::bigint AND handler <> ALL($4::text[])')}, leased AS (
         UPDATE ${RUNS} r
            SET ${LEASE_SET('$2', '$3')}
           FROM ${EVENTS} e
          WHERE r.event_row_id = $1::bigint AND e.id = r.event_row_id
            AND (r.state = 'received' OR (r.state = 'processing' AND r.lease_until < now()))
            AND r.handler <> ALL($4::text[])
            AND NOT ${PAUSED(PAUSES, 'r', 'e')}
         RETURNING ${LEASED_RUN_RETURNING}
       ), ${LOG_TAKEN('leased')}
       SELECT * FROM leased`,

    /** A run from before handler names (handler '') takes the one handler's name. 0 rows = bound meanwhile. */
    BIND_LEGACY_RUN: `UPDATE ${RUNS} SET handler = $3::text WHERE id = $1::bigint AND lease_token = $2::uuid AND handler = ''`,

    /**
     * Extends our lease ($1 run, $2 token, $3 lease ms). 0 rows = the lease is no longer ours.
     * From clock_timestamp(), not now(): now() is when the statement (or its transaction)
     * started, and a renewal that waited on a lock would write a lease already partly spent.
     */
    RENEW_LEASE: `UPDATE ${RUNS}
          SET lease_until = clock_timestamp() + $3::int * interval '1 millisecond'
        WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,

    /**
     * The lease proof before an external step's call ($1 run, $2 token, $3 lease ms, $4 ms the
     * call needs left): a READ while the lease still has $4 ms by Postgres's clock (no row
     * version, no WAL: a takeover needs the lease run out, which it cannot within $4 ms), else
     * RENEW_LEASE. Also whether the run must stop at this step boundary (`pause --now` of its
     * handler or source). 0 rows, or a renewal that found the lease gone (`renewed` false on a
     * lease that was not fresh) = the lease is no longer ours.
     */
    // mutant: step-proof-never-renews
    RENEW_LEASE_AT_STEP: `WITH held AS (
         SELECT r.id, r.lease_until >= clock_timestamp() + $4::int * interval '1 millisecond' AS fresh,
                ${STOP_NOW(PAUSES, EVENTS, 'r')} AS stop
           FROM ${RUNS} r
          WHERE r.id = $1::bigint AND r.lease_token = $2::uuid AND r.state = 'processing'
       ), renewed AS (
         UPDATE ${RUNS} r
            SET lease_until = clock_timestamp() + $3::int * interval '1 millisecond'
           FROM held
          WHERE r.id = held.id AND NOT held.fresh AND r.lease_token = $2::uuid AND r.state = 'processing'
         RETURNING r.id
       )
       SELECT held.stop, held.fresh, EXISTS (SELECT 1 FROM renewed) AS renewed FROM held`,

    /**
     * RENEW_LEASE_AT_STEP for several runs in ONE statement (run-batchers.ts: the proofs
     * that arrived while an earlier one was in flight): per run $1 run, $2 token, $3 lease ms, $4
     * ms the call needs left; one run at most once. Each exactly as alone: a READ where the lease
     * still has its ms by Postgres's clock, else a renewal under its own token. One row per run
     * still ours (stop, fresh, renewed); a run missing, or a renewal that found the lease gone,
     * = no longer ours. The runs to renew are locked in id order first (`stale`), so this
     * statement never holds one run row while waiting for another in an order of its own.
     */
    // mutant: proof-batch-never-renews, proof-batch-unfenced
    RENEW_LEASES_AT_STEP: `WITH x AS MATERIALIZED (
         SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::int[]) AS x(run_id, token, lease_ms, need_ms)
       ), held AS (
         SELECT r.id, x.token, x.lease_ms, r.lease_until >= clock_timestamp() + x.need_ms * interval '1 millisecond' AS fresh,
                ${STOP_NOW(PAUSES, EVENTS, 'r')} AS stop
           FROM ${RUNS} r JOIN x ON x.run_id = r.id AND r.lease_token = x.token
          WHERE r.state = 'processing'
       ), stale AS (
         SELECT r.id FROM ${RUNS} r WHERE r.id IN (SELECT id FROM held WHERE NOT fresh) ORDER BY r.id FOR NO KEY UPDATE
       ), renewed AS (
         UPDATE ${RUNS} r
            SET lease_until = clock_timestamp() + held.lease_ms * interval '1 millisecond'
           FROM held
          WHERE r.id = held.id AND r.id IN (SELECT id FROM stale) AND r.lease_token = held.token AND r.state = 'processing'
         RETURNING r.id
       )
       SELECT held.id, held.stop, held.fresh, EXISTS (SELECT 1 FROM renewed WHERE renewed.id = held.id) AS renewed FROM held`,

    /**
     * The fence, the first statement of every step transaction ($1 run, $2 token): locks the
     * run row (FOR NO KEY UPDATE, the same lock an UPDATE of it takes) and proves we still hold
     * the lease. While we hold this lock no one can take the lease over; 0 rows = someone
     * already did: roll back, commit nothing. `stop`: the run must stop at this step boundary
     * (`pause --now`): roll back, release the run to wait for the resume.
     */
    // mutant: fence-lock-token
    LOCK_LEASED_RUN: `SELECT r.generation, ${STOP_NOW(PAUSES, EVENTS, 'r')} AS stop FROM ${RUNS} r
        WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
        FOR NO KEY UPDATE`,

    /** processing -> done, fenced ($1 run, $2 token, $3 note), with the event's counters and state. 0 rows = lease lost. */
    // mutant: fence-done-token
    MARK_RUN_DONE: `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(),
                updated_at = now(), note = coalesce($3::text, note)
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id, attempt_started_at
       ), ${DONE_ATTEMPT()}
       ${EVENT_AFTER_RUN_DONE}`,

    /**
     * MARK_RUN_DONE for several runs in ONE statement (run-batchers.ts: the dones that arrived
     * while an earlier one was in flight): $1 runs, $2 their tokens. Each run exactly as
     * MARK_RUN_DONE would do it alone, fenced by its own token; one row per run marked done, and
     * a run missing from the result lost its lease. The events' counters and their lock order:
     * EVENTS_AFTER_RUNS_DONE. All or nothing: one commit for all.
     */
    MARK_RUNS_DONE: `WITH run AS (
         UPDATE ${RUNS} r
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
           FROM unnest($1::bigint[], $2::uuid[]) AS x(id, token)
          WHERE r.id = x.id AND r.lease_token = x.token AND r.state = 'processing'
         RETURNING r.id, r.event_row_id, r.attempt_started_at, x.token
       ), ${DONE_ATTEMPT('run.token')}, ${EVENTS_AFTER_RUNS_DONE}
       SELECT id FROM run`,

    /** processing -> failed (the dead letter state), fenced ($1 run, $2 token, $3 error), with the event. 0 rows = lease lost. */
    // mutant: fence-failed-token, failure-shape-not-written
    MARK_RUN_FAILED: `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'failed', lease_token = NULL, lease_until = NULL, finished_at = now(),
                last_error = $3::text, error_shape = ${SCHEMA}.error_shape($3::text), updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id, generation, attempts, attempt_started_at
       ), ${ENDED_ATTEMPT('failed', '$3::text')}
       UPDATE ${EVENTS} e
          SET runs_pending = e.runs_pending - 1, runs_failed = e.runs_failed + 1, state = ${EVENT_STATE_AFTER('-1', '1')},
              finished_at = CASE WHEN e.runs_pending - 1 = 0 THEN now() END, updated_at = now()
         FROM run WHERE e.id = run.event_row_id`,

    /**
     * A `final` step: its record AND processing -> done with the event, in one statement inside
     * the step's fenced transaction ($1 run, $2 token, $3 generation, $4 name, $5 result, $6
     * kind, $7 idempotency key, $8 key subject: an external step's, null for a local one).
     * One row always; the lease lost is an ERROR (lease_lost, SQLSTATE OH001: migrations/0017),
     * not 0 rows, because COMMIT is sent behind this statement in the same round trip
     * (commitWith): the error makes Postgres skip that COMMIT, and the transaction rolls back.
     */
    // mutant: final-record-lease-lost-silent
    RECORD_FINAL_STEP: `WITH step AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject)
         VALUES ($1::bigint, $3::int, $4::text, $6::text, $5::jsonb, $7::text, $8::text)
         RETURNING run_id
       ), ${DONE_AFTER_STEP}
       SELECT CASE WHEN EXISTS (SELECT 1 FROM event) THEN 1 ELSE ${SCHEMA}.lease_lost($1::bigint) END AS recorded`,

    /**
     * An external step's record, fenced, as ONE autocommit statement: no transaction, since no
     * code of the handler runs between the fence and the record (a local step's record needs one:
     * its function writes in it). $1 run, $2 token, $3 the generation the call was made for, $4
     * name, $5 result, $6 idempotency key, $7 key subject. `fence` locks the run row as
     * LOCK_LEASED_RUN does (FOR NO KEY UPDATE, our token), and the record is inserted only under
     * it (and for the generation the call was made for: implied by the token, since a replay
     * applies to finished runs only, and checked anyway); the statement commits both, so no
     * takeover commits between them. A call made before `pause --now` landed is recorded too (its
     * effect happened: the resumed run must not make it again); `stop` tells the caller to stop
     * after it. One row = the fence held (stop, and whether the record went in: not for another
     * generation); 0 rows = the lease was lost: nothing written.
     * `final`: the run's done and the event's in the same statement (DONE_AFTER_STEP).
     */
    // mutant: external-record-unfenced
    RECORD_EXTERNAL_STEP: (final: boolean) => `WITH fence AS (
         SELECT r.id, r.generation, ${STOP_NOW(PAUSES, EVENTS, 'r')} AS stop FROM ${RUNS} r
          WHERE r.id = $1::bigint AND r.lease_token = $2::uuid AND r.state = 'processing'
          FOR NO KEY UPDATE
       ), step AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject)
         SELECT id, $3::int, $4::text, 'external', $5::jsonb, $6::text, $7::text FROM fence
          WHERE fence.generation = $3::int
         RETURNING run_id
       )${
         final
           ? `, ${DONE_AFTER_STEP}
       SELECT stop, EXISTS (SELECT 1 FROM event) AS recorded FROM fence`
           : `
       SELECT stop, EXISTS (SELECT 1 FROM step) AS recorded FROM fence`
       }`,

    /**
     * RECORD_EXTERNAL_STEP for several runs in ONE statement (run-batchers.ts: the records that
     * arrived while an earlier one was in flight). Per record ($1 run, $2 token, $3 the
     * generation the call was made for, $4 name, $5 result, $6 idempotency key, $7 key subject,
     * $8 final); one run at most once. Each exactly as RECORD_EXTERNAL_STEP alone: `fence` locks
     * each run row under its own token (FOR NO KEY UPDATE, re-checked on the newest row), and a
     * record goes in only under its fence and for its generation; a `final` record's run is
     * done with it (`run`, only where its record went in) and its event's counters move
     * (EVENTS_AFTER_RUNS_DONE: by its runs done here, events locked in id order). The statement
     * commits them together. One row per run whose fence held (stop, and whether its record, and
     * for a final one its done, went in); a run missing lost its lease: nothing written for it.
     * The run rows are locked in id order (each is held by one worker's lease, so two batches
     * never share one; the order is for a takeover locking several runs of one event at once).
     */
    // mutant: external-batch-unfenced, external-final-batch-not-done
    RECORD_EXTERNAL_STEPS: `WITH x AS MATERIALIZED (
         SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bool[])
           AS x(run_id, token, generation, name, result, idempotency_key, key_subject, final)
       ), fence AS (
         SELECT r.id, r.generation, ${STOP_NOW(PAUSES, EVENTS, 'r')} AS stop
           FROM ${RUNS} r JOIN x ON x.run_id = r.id AND r.lease_token = x.token
          WHERE r.state = 'processing'
          ORDER BY r.id
          FOR NO KEY UPDATE OF r
       ), step AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject)
         SELECT x.run_id, x.generation, x.name, 'external', x.result::jsonb, x.idempotency_key, x.key_subject
           FROM x JOIN fence f ON f.id = x.run_id
          WHERE f.generation = x.generation
         RETURNING run_id
       ), run AS (
         UPDATE ${RUNS} r
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
           FROM x JOIN step s ON s.run_id = x.run_id
          WHERE r.id = x.run_id AND x.final AND r.lease_token = x.token AND r.state = 'processing'
         RETURNING r.id, r.event_row_id, r.attempt_started_at, x.token
       ), ${DONE_ATTEMPT('run.token')}, ${EVENTS_AFTER_RUNS_DONE}
       SELECT f.id, f.stop,
              CASE WHEN x.final THEN EXISTS (SELECT 1 FROM run WHERE run.id = f.id) ELSE EXISTS (SELECT 1 FROM step s WHERE s.run_id = f.id) END AS recorded
         FROM fence f JOIN x ON x.run_id = f.id`,

    /** processing -> received after a retryable error, fenced ($1 run, $2 token, $3 error). 0 rows = lease lost. */
    // mutant: fence-retry-token
    RELEASE_RUN_FOR_RETRY: `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'received', lease_token = NULL, lease_until = NULL,
                last_error = $3::text, error_shape = ${SCHEMA}.error_shape($3::text), updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, generation, attempts, attempt_started_at
       ), ${ENDED_ATTEMPT('retry', '$3::text')}
       SELECT id FROM run`,

    /**
     * processing -> received, waiting `paused`, fenced ($1 run, $2 token): a run stopped at a
     * step boundary by `pause --now`. The attempt it had started is given back (it ran no step
     * to its end that is not recorded), so a pause never uses up a run's attempts. 0 rows =
     * lease lost.
     */
    RELEASE_RUN_PAUSED: `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'received', lease_token = NULL, lease_until = NULL, waiting = 'paused',
                waiting_since = now(), attempts = greatest(attempts - 1, 0), updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, generation, attempts, attempt_started_at
       ), ${ENDED_ATTEMPT('retry', "'stopped at a step boundary: paused with --now'", 'run.attempts + 1')}
       SELECT id FROM run`,

    /**
     * Records a completed step. The primary key (run, generation, name) makes a second record of
     * the same step a unique violation: it cannot happen under the fence, and if it ever did,
     * the transaction (with its domain writes) rolls back instead of applying twice.
     */
    RECORD_STEP: `INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject)
       VALUES ($1::bigint, $2::int, $3::text, $4::text, $5::jsonb, $6::text, $7::text)`,

    /**
     * Serialises local steps about one object ($1 the key hashed from the schema and the object
     * key, lock-keys.ts); released by the step's COMMIT/ROLLBACK.
     */
    // mutant: object-lock-noop
    LOCK_OBJECT: 'SELECT pg_advisory_xact_lock($1::bigint)',

    /**
     * Records `version` ($3) as the highest applied for (handler $1, object $2) unless a higher
     * one is already recorded, and returns what was recorded before. One upsert, and every value
     * it returns is read under its row lock: ON CONFLICT DO UPDATE locks the row (waiting for a
     * step that holds it uncommitted) and evaluates its SET on the newest committed version, so
     * two steps racing for one object cannot both win, and each sees the other's version. The
     * row is always written (greatest of the two; `previous_version` = what it held), because
     * RETURNING sees only the new row: a stale call costs a row version, and is rare.
     */
    // mutant: ordered-version-lowered, ordered-previous-from-snapshot
    RECORD_OBJECT_VERSION: `INSERT INTO ${VERSIONS} AS v (handler, object_key, version) VALUES ($1::text, $2::text, $3::numeric)
       ON CONFLICT (handler, object_key) DO UPDATE
          SET version = greatest(v.version, excluded.version), previous_version = v.version,
              updated_at = CASE WHEN v.version <= excluded.version THEN now() ELSE v.updated_at END
       RETURNING previous_version::text AS previous`,
  };
}
