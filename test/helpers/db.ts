import { createPool, type Pool } from '@oncehook/shared';
import { createScratchDatabase } from '@oncehook/harness';
import { inject } from 'vitest';
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
