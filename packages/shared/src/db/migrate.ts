/**
 * Applies the numbered SQL files in ./migrations, in order, once each.
 *
 * Safe to run from several processes at once (every replica may run it at start, and the
 * compose file runs it as a one-shot service): the whole run is one transaction that first
 * takes a transaction-scoped advisory lock, so concurrent runners queue behind each other and
 * the second one finds nothing left to do. All pending migrations commit together or not at
 * all (so migrations must not use CREATE INDEX CONCURRENTLY; add a separate tool for that).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Pool } from './pool';
import { PG_DUPLICATE_DATABASE } from './pg-errors';

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Arbitrary constant shared by every runner: the advisory lock that serialises migrations. */
const MIGRATION_LOCK_KEY = 7_245_001;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file)).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const version = Number.parseInt(file.slice(0, 4), 10);
    if (migrations.some((m) => m.version === version)) throw new Error(`Two migrations share version ${version}: rename ${file}`);
    migrations.push({ version, name: file, sql: await readFile(path.join(dir, file), 'utf8') });
  }
  return migrations;
}

/** Applies what is pending; returns the names applied by this call (empty when up to date). */
export async function migrate(pool: Pool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await loadMigrations(dir);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await client.query(`
      CREATE TABLE IF NOT EXISTS oncehook_migrations (
        version    integer primary key,
        name       text not null,
        applied_at timestamptz not null default now()
      )`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM oncehook_migrations');
    const applied = new Set(rows.map((row) => row.version));
    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      try {
        await client.query(migration.sql);
      } catch (error) {
        throw new Error(`Migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      await client.query('INSERT INTO oncehook_migrations (version, name) VALUES ($1::int, $2::text)', [
        migration.version,
        migration.name,
      ]);
      done.push(migration.name);
    }
    await client.query('COMMIT');
    return done;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/**
 * Creates the database named in `databaseUrl` if it does not exist, connecting to the
 * `postgres` maintenance database of the same server. Lets `npm start` work on a machine
 * that has Postgres but no `oncehook` database yet.
 */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error('DATABASE_URL names no database (expected postgres://user@host:port/NAME)');
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1::text', [name]);
    if (rowCount) return false;
    try {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      return true;
    } catch (error) {
      // Another process created it between our check and our CREATE.
      if ((error as { code?: string }).code === PG_DUPLICATE_DATABASE) return false;
      throw error;
    }
  } finally {
    await client.end();
  }
}
