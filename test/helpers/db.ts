import { createPool, type Pool } from '@oncehook/shared';
import { createScratchDatabase, waitFor } from '@oncehook/harness';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import { testDatabaseName } from './test-database-names.js';

export interface TestDatabase {
  name: string;
  url: string;
  pool: Pool;
  drop(): Promise<void>;
}

/** A fresh database for one test file, cloned from the run's migrated template (Oncehook + the example shop). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const database = await createScratchDatabase({ name: testDatabaseName('oncehook_test_'), template: inject('templateDb') });
  const pool = createPool(database.url, { max: 20 });
  return {
    name: database.name,
    url: database.url,
    pool,
    async drop() {
      await pool.end();
      await database.drop();
    },
  };
}

/**
 * The file's own database for its tests: created before them, dropped after them; `beforeEach`
 * (emptying tables, say) runs before every test. Read `.db` inside a test or hook.
 */
export function useTestDatabase(options: { beforeEach?: (db: TestDatabase) => Promise<unknown> } = {}): { readonly db: TestDatabase } {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  if (options.beforeEach) beforeEach(() => options.beforeEach!(scope.db));
  const scope = {
    get db(): TestDatabase {
      if (!db) throw new Error('useTestDatabase: the database is created in beforeAll; read .db inside a test or hook');
      return db;
    },
  };
  return scope;
}

/** Backends of the pool's database waiting on a lock whose statement matches `like` (all, without). */
export async function lockWaiters(pool: Pool, like = '%'): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE $1`,
    [like],
  );
  return rows[0]?.n ?? 0;
}

/** Until `n` backends of the pool's database wait on a lock (a forced interleaving's checkpoint). */
export async function untilLockWaiters(pool: Pool, n: number, what: string, like = '%'): Promise<void> {
  await waitFor(async () => (await lockWaiters(pool, like)) >= n, { timeoutMs: 20_000, intervalMs: 10, what });
}
