import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool, migrate, type Pool } from '@oncehook/shared';
import { inject } from 'vitest';
import { ADMIN_URL, urlFor } from './db-urls';

export interface TestDatabase {
  name: string;
  url: string;
  pool: Pool;
  drop(): Promise<void>;
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>, adminUrl = ADMIN_URL): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh database for one test file, cloned from the migrated template. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `oncehook_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${inject('templateDb')}`));
  const url = urlFor(name);
  const pool = createPool(url, { max: 20 });
  return {
    name,
    url,
    pool,
    async drop() {
      await pool.end();
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

/** An empty (unmigrated) database on the given server. */
export async function createEmptyDatabase(baseUrl?: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `oncehook_empty_${randomBytes(6).toString('hex')}`;
  const adminUrl = baseUrl ? `${baseUrl}/postgres` : ADMIN_URL;
  await admin((c) => c.query(`CREATE DATABASE ${name}`), adminUrl);
  return {
    name,
    url: baseUrl ? `${baseUrl}/${name}` : urlFor(name),
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`), adminUrl).then(() => {}),
  };
}

export async function migrated(url: string): Promise<void> {
  const pool = createPool(url, { max: 1 });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
}
