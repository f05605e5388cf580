/**
 * The scheduled backfill's statements (backfill-scheduler.ts): a source's pass is leased
 * through its row, so one process at a time runs it, fleet-wide. Plain text; execution in
 * ../backfill-schedule.ts.
 */
import type { Tables } from '../tables.js';

export function backfillScheduleStatements(t: Tables) {
  const { BACKFILL_SCHEDULE } = t;
  return {
    /** The rows of the scheduled sources ($1), due at once when new. */
    ENSURE_SOURCES: `INSERT INTO ${BACKFILL_SCHEDULE} (source) SELECT unnest($1::text[]) ON CONFLICT (source) DO NOTHING`,

    /**
     * Source $1's pass, leased to token $2 for $3 ms: only when it is due and no live lease
     * holds it. The row lock of the UPDATE is the atomic unit: of two workers asking at once,
     * the second re-checks the guard on the first's committed row (READ COMMITTED) and gets 0
     * rows. A crashed holder's lease expires. 0 rows = not due, or another process runs it.
     */
    // mutant: backfill-schedule-every-process
    LEASE_PASS: `UPDATE ${BACKFILL_SCHEDULE}
          SET lease_token = $2::uuid, leased_until = now() + $3::int * interval '1 millisecond', last_started_at = now()
        WHERE source = $1::text AND next_at <= now() AND (leased_until IS NULL OR leased_until < now())
       RETURNING cursor`,

    /**
     * The end of our pass (source $1, token $2): the next one due in $3 ms, where to go on ($4,
     * NULL: from the newest), what it found ($5) and its error ($6). Fenced by the token: a pass
     * whose lease was taken over records nothing. 0 rows = it was.
     */
    FINISH_PASS: `UPDATE ${BACKFILL_SCHEDULE}
          SET lease_token = NULL, leased_until = NULL, next_at = now() + $3::int * interval '1 millisecond',
              cursor = $4::text, last_finished_at = now(), last_counts = $5::jsonb, last_error = $6::text
        WHERE source = $1::text AND lease_token = $2::uuid`,

    /** Every scheduled source's row (the admin, tests). */
    LIST: `SELECT source, next_at AS "nextAt", leased_until AS "leasedUntil", cursor, last_started_at AS "lastStartedAt",
                  last_finished_at AS "lastFinishedAt", last_counts AS "lastCounts", last_error AS "lastError"
             FROM ${BACKFILL_SCHEDULE} ORDER BY source`,
  };
}
