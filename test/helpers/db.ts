import { randomBytes } from 'node:crypto';
import { createPool, type Pool } from '@oncehook/shared';
import { ADMIN_URL, urlFor, withAdmin } from '@oncehook/harness';
import { inject } from 'vitest';

export interface TestDatabase {
  name: string;
  url: string;
  pool: Pool;
  drop(): Promise<void>;
}

/** A fresh database for one test file, cloned from the run's migrated template (Oncehook + the example shop). */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `oncehook_test_${randomBytes(6).toString('hex')}`;
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
