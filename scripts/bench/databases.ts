/** Databases of the bench's own on the machine's Postgres, migrated (Oncehook and the example shop). */
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { urlFor, withAdmin } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';

const admin = (sql: string) => withAdmin((client) => client.query(sql));

export async function createTestDatabaseOn(name: string): Promise<{ name: string; url: string }> {
  await admin(`CREATE DATABASE ${name}`);
  const url = urlFor(name);
  const pool = createPool(url, { max: 1 });
  await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  await pool.end();
  return { name, url };
}

export async function dropDatabase(name: string): Promise<void> {
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}
