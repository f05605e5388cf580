/**
 * Execution of the reconciler's and retention's statements (sql/recovery.ts). The statement
 * texts are returned too (EXPIRED_LEASES_SQL, ...), so tests can EXPLAIN them.
 */
import type { EventJobData } from '../vocabulary.js';
import type { Queryable } from './rows.js';
import { recoveryStatements } from './sql/recovery.js';
import type { Tables } from './tables.js';

export function createRecoveryQueries(t: Tables) {
  const sql = recoveryStatements(t);
  return {
    EXPIRED_LEASES_SQL: sql.EXPIRED_LEASES,
    STALE_RUNS_SQL: sql.STALE_RUNS,
    STALE_EVENTS_SQL: sql.STALE_EVENTS,
    RETENTION_DELETE_SQL: sql.RETENTION_DELETE,
    RETENTION_PRUNE_SQL: sql.RETENTION_PRUNE,

    /** Runs whose lease expired, back to `received` (at most `limit`); their jobs to enqueue. */
    async releaseExpiredLeases(db: Queryable, limit: number): Promise<EventJobData[]> {
      return (await db.query<EventJobData>(sql.EXPIRED_LEASES, [limit])).rows;
    },
    /** `received` runs untouched for `olderThanMs` (lost jobs), touched; their jobs to enqueue. */
    async takeStaleReceivedRuns(db: Queryable, olderThanMs: number, limit: number): Promise<EventJobData[]> {
      // `wait` only for a waiting run (its job continues the chain); absent otherwise, as in every other job.
      return (await db.query<EventJobData & { wait: number | null }>(sql.STALE_RUNS, [olderThanMs, limit])).rows.map(({ wait, ...job }) =>
        wait === null ? job : { ...job, wait },
      );
    },
    /** Events never dispatched and untouched for `olderThanMs`, touched; their dispatch jobs. */
    async takeStaleReceivedEvents(db: Queryable, olderThanMs: number, limit: number): Promise<EventJobData[]> {
      return (await db.query<EventJobData>(sql.STALE_EVENTS, [olderThanMs, limit])).rows;
    },
    /** The sources present (one index probe each). */
    async distinctSources(db: Queryable): Promise<string[]> {
      return (await db.query<{ source: string }>(sql.SOURCES)).rows.map((row) => row.source);
    },
    /** Prunes one batch past the payload horizon; returns how many (< limit: caught up). */
    async pruneExpiredBatch(db: Queryable, source: string, days: number, limit: number): Promise<number> {
      return (await db.query(sql.RETENTION_PRUNE, [source, days, limit])).rowCount ?? 0;
    },
    /** Deletes one batch of done events past the key horizon; returns how many (< limit: caught up). */
    async deleteExpiredBatch(db: Queryable, source: string, days: number, limit: number): Promise<number> {
      return (await db.query(sql.RETENTION_DELETE, [source, days, limit])).rowCount ?? 0;
    },
  };
}
