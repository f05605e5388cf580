/** Databases of the bench's own on the machine's Postgres, migrated (Oncehook and the example shop). */
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { createScratchDatabase, dropScratchDatabase, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';

export async function createTestDatabaseOn(name: string): Promise<{ name: string; url: string }> {
  const { url } = await createScratchDatabase({ name });
  const pool = createPool(url, { max: 1 });
  await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  await pool.end();
  return { name, url };
}

export const dropDatabase = (name: string): Promise<void> => dropScratchDatabase(name);

/** What a bench run started, collected as it goes, for `releaseAll` at its end. */
export interface BenchResources {
  services: Service[];
  pools: Pool[];
  databases: string[];
}

/** kill -9 every process, close every pool, drop every database (each failure ignored: cleanup). */
export async function releaseAll({ services, pools, databases }: BenchResources): Promise<void> {
  await Promise.all(services.map((s) => s.kill9()));
  await Promise.all(pools.map((p) => p.end().catch(() => {})));
  for (const name of databases) await dropDatabase(name).catch(() => {});
}
