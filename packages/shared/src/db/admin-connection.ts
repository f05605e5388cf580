/**
 * One short connection of its own (not from a pool), for what runs outside any database: CREATE
 * and DROP DATABASE, pg_terminate_backend. The testkit's scratch databases and the harness' use
 * it; a lost connection fails the next statement instead of the process.
 */
import pg from 'pg';

export async function withAdminConnection<T>(connectionString: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
