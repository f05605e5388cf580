/**
 * Retention: deletes done events older than their source's horizon, in small batches, under
 * the reconciler's leadership (each batch is its own short transaction that first takes the
 * reconciler's advisory lock with pg_try_advisory_xact_lock; a process that does not get it
 * skips). Each batch is one index range scan (see queries.deleteExpiredBatch), so its cost and
 * its lock time depend on the batch size, not on the table size. Failed events are kept.
 * (runs, steps and operator actions go with their event: ON DELETE CASCADE)
 *
 * `runOnce()` deletes up to maxBatches batches per provider and returns the counts.
 */
import { advisoryLockKey, retentionDaysFor, withTransaction, type Logger, type Pool, type Queries, type RetentionPolicy } from '@oncehook/shared';

export interface RetentionSettings {
  policy: RetentionPolicy;
  batchSize: number;
  maxBatches: number;
}

export interface RetentionCounts {
  leader: boolean;
  deleted: number;
  byProvider: Record<string, number>;
}

export function createRetention(deps: { pool: Pool; queries: Queries; log: Logger; settings: RetentionSettings }) {
  const { pool, queries, log, settings } = deps;
  const lockKey = advisoryLockKey(queries.schema, 'reconciler');
  return {
    async runOnce(): Promise<RetentionCounts> {
      const counts: RetentionCounts = { leader: true, deleted: 0, byProvider: {} };
      for (const provider of await queries.distinctProviders(pool)) {
        const days = retentionDaysFor(settings.policy, provider);
        for (let batch = 0; batch < settings.maxBatches; batch += 1) {
          const deleted = await withTransaction(pool, async (tx) => {
            const { rows } = await tx.query<{ leader: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS leader', [lockKey]);
            if (!rows[0]?.leader) return null;
            return queries.deleteExpiredBatch(tx, provider, days, settings.batchSize);
          });
          if (deleted === null) return { ...counts, leader: false };
          counts.deleted += deleted;
          counts.byProvider[provider] = (counts.byProvider[provider] ?? 0) + deleted;
          if (deleted < settings.batchSize) break;
        }
      }
      if (counts.deleted > 0) log.info(counts, 'retention deleted expired events');
      return counts;
    },
  };
}
