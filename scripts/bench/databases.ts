/** Databases of the bench's own on the machine's Postgres, migrated (Oncehook and the example shop). */
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { createScratchDatabase, dropScratchDatabase } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';

export async function createTestDatabaseOn(name: string): Promise<{ name: string; url: string }> {
  const { url } = await createScratchDatabase({ name });
  const pool = createPool(url, { max: 1 });
  await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  await pool.end();
  return { name, url };
}

export const dropDatabase = (name: string): Promise<void> => dropScratchDatabase(name);
