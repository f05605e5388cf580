/** Databases of the bench's own on the machine's Postgres, migrated (Oncehook and the example shop). */
import pg from 'pg';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { createPool, migrate } from '@oncehook/shared';

const BASE = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: `${BASE}/postgres` });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function createTestDatabaseOn(name: string): Promise<{ name: string; url: string }> {
  await admin(`CREATE DATABASE ${name}`);
  const url = `${BASE}/${name}`;
  const pool = createPool(url, { max: 1 });
  await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  await pool.end();
  return { name, url };
}

export async function dropDatabase(name: string): Promise<void> {
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
