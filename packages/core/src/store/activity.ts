/** Execution of the activity statements (sql/activity.ts). */
import type { Queryable } from './rows.js';
import { activityStatements } from './sql/activity.js';
import type { Tables } from './tables.js';

/** One cumulative reading (delivery, run) or sample (backlog); `buckets`: counts per latency bucket, the last over all bounds. */
export interface ActivitySample {
  kind: 'delivery' | 'run' | 'backlog';
  name: string;
  result: string;
  count: number;
  buckets?: number[];
}

/** One stored minute of one series. */
export interface ActivityRow {
  minute: Date;
  kind: 'delivery' | 'run' | 'backlog';
  name: string;
  result: string;
  count: number;
  buckets: number[] | null;
}

export function createActivityQueries(t: Tables) {
  const sql = activityStatements(t);
  return {
    async addActivity(db: Queryable, samples: ActivitySample[]): Promise<void> {
      await db.query(sql.ADD_ACTIVITY, [
        samples.map((s) => s.kind),
        samples.map((s) => s.name),
        samples.map((s) => s.result),
        samples.map((s) => Math.round(s.count)),
        samples.map((s) => (s.buckets ? s.buckets.map((n) => Math.round(n)).join(',') : '')),
      ]);
    },
    async readActivity(db: Queryable, seconds: number): Promise<ActivityRow[]> {
      return (await db.query<ActivityRow>(sql.READ_ACTIVITY, [seconds])).rows;
    },
    async pruneActivity(db: Queryable, keepHours: number): Promise<void> {
      await db.query(sql.PRUNE_ACTIVITY, [keepHours]);
    },
    async backlog(db: Queryable): Promise<{ received: number; processing: number; oldestReceivedSeconds: number }> {
      return (await db.query<{ received: number; processing: number; oldestReceivedSeconds: number }>(sql.BACKLOG)).rows[0]!;
    },
  };
}
