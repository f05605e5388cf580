import { createPool, type Pool } from '@oncehook/shared';
import { ADMIN_URL, urlFor, withAdmin } from '@oncehook/harness';
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
  const name = testDatabaseName('oncehook_test_');
  await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDb')}`), ADMIN_URL);
  const url = urlFor(name);
  const pool = createPool(url, { max: 20 });
  return {
    name,
    url,
    pool,
    async drop() {
      await pool.end();
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
