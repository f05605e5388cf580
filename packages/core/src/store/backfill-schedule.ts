/** Execution of the scheduled backfill's statements (sql/backfill-schedule.ts). */
import type { Queryable } from './rows.js';
import { backfillScheduleStatements } from './sql/backfill-schedule.js';
import type { Tables } from './tables.js';

export interface BackfillScheduleRow {
  source: string;
  nextAt: Date;
  leasedUntil: Date | null;
  cursor: string | null;
  lastStartedAt: Date | null;
  lastFinishedAt: Date | null;
  lastCounts: Record<string, number> | null;
  lastError: string | null;
}

export function createBackfillScheduleQueries(t: Tables) {
  const sql = backfillScheduleStatements(t);
  return {
    async ensureBackfillSources(db: Queryable, sources: string[]): Promise<void> {
      await db.query(sql.ENSURE_SOURCES, [sources]);
    },
    /** null = not due, or another process runs it; otherwise where to go on (its cursor). */
    async leaseBackfillPass(db: Queryable, source: string, token: string, leaseMs: number): Promise<{ cursor: string | null } | null> {
      return (await db.query<{ cursor: string | null }>(sql.LEASE_PASS, [source, token, leaseMs])).rows[0] ?? null;
    },
    /** false = our lease was taken over (nothing recorded). */
    async finishBackfillPass(
      db: Queryable,
      source: string,
      token: string,
      pass: { nextInMs: number; cursor: string | null; counts: Record<string, number>; error: string | null },
    ): Promise<boolean> {
      const { rowCount } = await db.query(sql.FINISH_PASS, [source, token, pass.nextInMs, pass.cursor, JSON.stringify(pass.counts), pass.error]);
      return rowCount === 1;
    },
    async backfillSchedule(db: Queryable): Promise<BackfillScheduleRow[]> {
      return (await db.query<BackfillScheduleRow>(sql.LIST)).rows;
    },
  };
}
