/**
 * The attempt log's statement fragments (migrations/0019), shared by the worker's statements
 * (runs.ts), flow control's wait (flow.ts), the reconciler (recovery.ts) and the re-drive
 * (operators.ts): an attempt writes
 * its row only when it ends other than done. The run row describes its current attempt (token,
 * `attempts`, `attempt_started_at` set by every lease, and `finished_at` once done);
 * `attempt_history` (a view) reads both.
 */
import type { Tables } from '../tables.js';

export function attemptLogStatements(t: Tables) {
  const { RUNS, ATTEMPTS } = t;

  /**
   * A verdict other than done (CTE `run` returning id, generation, attempts, attempt_started_at;
   * $2 our token): the attempt's row, inserted. `attempt`: its number, when the statement changed
   * `attempts`. ON CONFLICT: an attempt leased before migrations/0019 has its row; close it.
   */
  const ENDED_ATTEMPT = (outcome: string, error: string, attempt = 'run.attempts') => `verdict AS (
         INSERT INTO ${ATTEMPTS} AS a (run_id, lease_token, generation, attempt, started_at, ended_at, outcome, error)
         SELECT run.id, $2::uuid, run.generation, ${attempt}, coalesce(run.attempt_started_at, now()), now(), '${outcome}', ${error} FROM run
         ON CONFLICT (run_id, lease_token) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error
       )`;
  /**
   * A done verdict writes no row: the run row holds the attempt. Only an attempt leased before
   * migrations/0019 (its run's attempt_started_at is NULL) has a row, closed here as before.
   * `token`: the attempt's lease token (default $2, our token).
   */
  // mutant: done-attempt-logged, done-attempt-upgrade-open
  const DONE_ATTEMPT = (token = '$2::uuid') => `verdict AS (
         UPDATE ${ATTEMPTS} a SET ended_at = now(), outcome = 'done', error = NULL
           FROM run WHERE run.attempt_started_at IS NULL AND a.run_id = run.id AND a.lease_token = ${token}
       )`;
  /**
   * An attempt whose lease expired (its worker died or hung), logged by whatever ends it: the run
   * row is about to describe a new attempt, or none. `rows`: a FROM clause over a relation `x`
   * with the runs' id, lease_token, generation, attempts and attempt_started_at as they were
   * before the statement changed them, restricted to the runs it moved. Used by the takeovers
   * below, the reconciler (EXPIRED_LEASES) and a re-drive (REDRIVE_RUNS). ON CONFLICT: the
   * attempt was logged already (by its holder, by another of these, or leased before
   * migrations/0019).
   */
  const LOG_EXPIRED = (rows: string) => `lost AS (
         INSERT INTO ${ATTEMPTS} (run_id, lease_token, generation, attempt, started_at)
         SELECT x.id, x.lease_token, x.generation, x.attempts, coalesce(x.attempt_started_at, now()) FROM ${rows}
         ON CONFLICT (run_id, lease_token) DO NOTHING
       )`;
  /**
   * A lease taking over runs whose lease expired logs the attempts it ends. `taken` (the runs
   * matching `where` that are `processing` with an expired lease, with their token and start) is
   * read from the statement's snapshot; `moved` (a CTE returning `id`) holds the runs the
   * statement changed. What the snapshot read is the attempt the guard ended: had the row changed
   * after the snapshot, its holder or the reconciler ended that attempt (and logged it: ON
   * CONFLICT in LOG_EXPIRED), or another lease took it, whose lease is live when this statement
   * re-checks its guard on the newest row (right after that lease's commit), so the guard no
   * longer matches.
   */
  // mutant: expired-attempt-unlogged
  const TAKEN_ATTEMPTS = (where: string) => `taken AS (
         SELECT id, lease_token, generation, attempts, attempt_started_at FROM ${RUNS}
          WHERE ${where} AND state = 'processing' AND lease_until < now()
       )`;
  const LOG_TAKEN = (moved: string) => LOG_EXPIRED(`taken x JOIN ${moved} m ON m.id = x.id`);

  return { ENDED_ATTEMPT, DONE_ATTEMPT, LOG_EXPIRED, TAKEN_ATTEMPTS, LOG_TAKEN };
}
