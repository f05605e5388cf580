/**
 * The activity statements (migrations/0013): the minute's deltas every process adds, the
 * backlog the reconciler's leader samples, the console's read, the leader's pruning. Plain
 * text; execution in ../activity.ts.
 */
import type { Tables } from '../tables.js';

export function activityStatements(t: Tables) {
  const ACTIVITY = `${t.SCHEMA}.activity`;
  return {
    /**
     * Adds samples to the current minute ($1-$5: kinds, names, results, counts, buckets as
     * comma-separated text or ''): deltas add up (several processes, several flushes), a
     * backlog sample replaces the minute's last one. One statement per flush.
     */
    ADD_ACTIVITY: `INSERT INTO ${ACTIVITY} AS a (minute, kind, name, result, count, buckets)
       SELECT date_trunc('minute', now()), k, n, r, c, CASE WHEN b = '' THEN NULL ELSE string_to_array(b, ',')::bigint[] END
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS s(k, n, r, c, b)
       ON CONFLICT (minute, kind, name, result) DO UPDATE
          SET count = CASE WHEN a.kind = 'backlog' THEN EXCLUDED.count ELSE a.count + EXCLUDED.count END,
              buckets = CASE WHEN a.buckets IS NULL OR a.kind = 'backlog' THEN EXCLUDED.buckets WHEN EXCLUDED.buckets IS NULL THEN a.buckets
                             ELSE ARRAY(SELECT x + y FROM unnest(a.buckets, EXCLUDED.buckets) AS u(x, y)) END`,
    /** The minutes of the last $1 seconds, oldest first (the primary key leads with the minute). */
    READ_ACTIVITY: `SELECT minute, kind, name, result, count::float8 AS count, buckets::float8[] AS buckets FROM ${ACTIVITY}
        WHERE minute >= date_trunc('minute', now()) - $1::int * interval '1 second' ORDER BY minute`,
    /** The leader's pruning: minutes older than $1 hours. */
    PRUNE_ACTIVITY: `DELETE FROM ${ACTIVITY} WHERE minute < now() - $1::int * interval '1 hour'`,
    /** The backlog now: runs received (and the oldest's age), processing, waiting by reason. */
    BACKLOG: `SELECT
         (SELECT count(*) FROM ${t.RUNS} WHERE state = 'received')::int AS received,
         (SELECT count(*) FROM ${t.RUNS} WHERE state = 'processing')::int AS processing,
         coalesce((SELECT extract(epoch FROM now() - min(updated_at)) FROM ${t.RUNS} WHERE state = 'received'), 0)::int AS "oldestReceivedSeconds"`,
  };
}
