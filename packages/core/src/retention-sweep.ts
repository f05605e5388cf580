/**
 * Retention, two horizons: prunes done events older than their source's RETENTION_DAYS (payload,
 * runs, steps and delivery log deleted; the narrow key row kept), then deletes rows older than
 * KEY_RETENTION_DAYS; in small batches, under
 * the reconciler's leadership (each batch is its own short transaction that first takes the
 * reconciler's advisory lock with pg_try_advisory_xact_lock; a process that does not get it
 * skips). Each batch is one index range scan (see queries.deleteExpiredBatch), so its cost and
 * its lock time depend on the batch size, not on the table size. Failed events are kept.
 * (runs, steps and operator actions go with their event: ON DELETE CASCADE)
 *
 * `runOnce()` deletes up to maxBatches batches per provider and returns the counts.
 */
import { withTransaction, type Logger, type Pool, type PoolClient } from '@oncehook/shared';
import { retentionDaysFor, type RetentionPolicy } from '@oncehook/providers';
import { advisoryLockKey } from './lock-keys.js';
import type { Queries } from './store/queries.js';

export interface RetentionSettings {
  policy: RetentionPolicy;
  batchSize: number;
  maxBatches: number;
}

export interface RetentionCounts {
  leader: boolean;
  /** Events whose payload, runs and steps were deleted (past RETENTION_DAYS); their keys stay. */
  pruned: number;
  /** Event rows (keys) deleted (past KEY_RETENTION_DAYS). */
  deleted: number;
  bySource: Record<string, { pruned: number; deleted: number }>;
}

export function createRetention(deps: { pool: Pool; queries: Queries; log: Logger; settings: RetentionSettings }) {
  const { pool, queries, log, settings } = deps;
  const lockKey = advisoryLockKey(queries.schema, 'reconciler');

  /** Up to maxBatches batches of one kind for one provider; null when another process leads. */
  async function batches(run: (tx: PoolClient) => Promise<number>): Promise<number | null> {
    let total = 0;
    for (let batch = 0; batch < settings.maxBatches; batch += 1) {
      const done = await withTransaction(pool, async (tx) => {
        const { rows } = await tx.query<{ leader: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS leader', [lockKey]);
        if (!rows[0]?.leader) return null;
        return run(tx);
      });
      if (done === null) return null;
      total += done;
      if (done < settings.batchSize) break;
    }
    return total;
  }

  return {
    async runOnce(): Promise<RetentionCounts> {
      const counts: RetentionCounts = { leader: true, pruned: 0, deleted: 0, bySource: {} };
      for (const source of await queries.distinctSources(pool)) {
        // Whole rows past KEY_RETENTION_DAYS first (no point pruning what goes anyway), then
        // payloads past the source's RETENTION_DAYS.
        const deleted = await batches((tx) => queries.deleteExpiredBatch(tx, source, settings.policy.keyDays, settings.batchSize));
        if (deleted === null) return { ...counts, leader: false };
        const pruned = await batches((tx) => queries.pruneExpiredBatch(tx, source, retentionDaysFor(settings.policy, source), settings.batchSize));
        if (pruned === null) return { ...counts, leader: false };
        counts.pruned += pruned;
        counts.deleted += deleted;
        if (pruned + deleted > 0) counts.bySource[source] = { pruned, deleted };
      }
      if (counts.pruned + counts.deleted > 0) log.info(counts, 'retention pruned payloads and deleted expired keys');
      return counts;
    },
  };
}
