/** Databases of the tests' and scripts' own, on the shared server or on one of their own. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ADMIN_URL, urlFor } from './db-urls.js';

/** Runs fn on a connection to the server's `postgres` database. */
export async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>, adminUrl = ADMIN_URL): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** An empty (unmigrated) database on the given server (default: the shared one). */
export async function createEmptyDatabase(baseUrl?: string, prefix = 'oncehook_empty'): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const adminUrl = baseUrl ? `${baseUrl}/postgres` : ADMIN_URL;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`), adminUrl);
  return {
    name,
    url: baseUrl ? `${baseUrl}/${name}` : urlFor(name),
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`), adminUrl).then(() => {}),
  };
}
