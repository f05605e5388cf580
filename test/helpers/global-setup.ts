/**
 * Once per test run: build a migrated template database. Each test file clones it
 * (CREATE DATABASE ... TEMPLATE), which takes milliseconds and isolates files from each other.
 */
import { createPool, migrate } from '@oncehook/shared';
import pg from 'pg';
import { ADMIN_URL, TEMPLATE_DB, urlFor } from './db-urls';

export default async function setup(): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const pool = createPool(urlFor(TEMPLATE_DB), { max: 1 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
}
