/**
 * Applies numbered SQL files, in order, once each, tracked in `<schema>.migrations`.
 *
 * Migration sets: the framework's own (`oncehook`, this package's migrations/ directory, whose
 * files name their schema `:ONCEHOOK_SCHEMA`), and any number of application sets (the
 * example shop's tables, a user's own): `{ name, dir }`, tracked separately by name, applied
 * after the framework's, SQL taken as written.
 *
 * Safe to run from several processes at once (every replica may run it at start, and the
 * compose file runs it as a one-shot service): the whole run is one transaction that first
 * takes a transaction-scoped advisory lock, so concurrent runners queue behind each other and
 * the second one finds nothing left to do. All pending migrations commit together or not at
 * all (so migrations must not use CREATE INDEX CONCURRENTLY).
 *
 * Databases from before the schema existed (tables in `public`, tracked in
 * public.oncehook_migrations) are upgraded in the same transaction: the legacy migrations
 * still missing are applied, the new tables created, the data moved (db/legacy-upgrade.sql).
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ConfigError } from '@oncehook/sdk';
import { advisoryLockKey } from './lock-keys.js';
import { DEFAULT_SCHEMA, schemaIdentifier, PG_DUPLICATE_DATABASE } from '@oncehook/shared';
import type { Pool, PoolClient } from '@oncehook/shared';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const MIGRATIONS_DIR = path.join(HERE, 'migrations');
const LEGACY_DIR = path.join(HERE, 'legacy');
const LEGACY_UPGRADE_FILE = path.join(HERE, 'legacy-upgrade.sql');
const PLACEHOLDER = /:ONCEHOOK_SCHEMA\b/g;

/** The framework's own set. */
export const FRAMEWORK_SET = 'oncehook';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export interface MigrationSet {
  /** Tracking name, e.g. `shop`; lowercase letters, digits, - and _. */
  name: string;
  dir: string;
}

export interface MigrateOptions {
  /** Oncehook's schema (default `oncehook`). */
  schema?: string;
  /** Application sets applied after the framework's, in order. */
  sets?: MigrationSet[];
}

export interface MigrateResult {
  /** `set/file` of every migration this call applied. */
  applied: string[];
  /** True when this call moved a pre-schema database's tables into the schema. */
  upgradedLegacy: boolean;
}

/** A migration's file name: four digits, `_`, lowercase letters, digits and `_`, `.sql`. */
export const MIGRATION_FILE_PATTERN = /^\d{4}_[a-z0-9_]+\.sql$/;

/**
 * The migrations of one folder, in order. Strict: a file the runner would not apply is an
 * error naming it (a `001_paid_invoices.sql` silently skipped leaves the table missing until a
 * handler fails on it); only dotfiles (.gitkeep) and `.md` notes may sit beside migrations. A
 * folder that does not exist is one line saying so. Throws ConfigError.
 */
export async function loadMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ConfigError(`migrations folder ${dir} does not exist${code === 'ENOTDIR' ? ' (it is a file)' : ''}: check --dir`);
    throw error;
  }
  const unexpected = entries.filter((file) => !MIGRATION_FILE_PATTERN.test(file) && !file.startsWith('.') && !file.endsWith('.md'));
  // mutant: migration-file-skipped
  if (unexpected.length > 0) {
    throw new ConfigError(
      `${dir}: ${unexpected.map((f) => `"${f}"`).join(', ')} ${unexpected.length === 1 ? 'is' : 'are'} not a migration the runner applies: name each NNNN_name.sql (four digits, an underscore, lowercase letters, digits and underscores), e.g. 0001_paid_invoices.sql; only dotfiles and .md notes may sit beside them`,
    );
  }
  const files = entries.filter((file) => MIGRATION_FILE_PATTERN.test(file)).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const version = Number.parseInt(file.slice(0, 4), 10);
    if (migrations.some((m) => m.version === version)) throw new Error(`Two migrations share version ${version} in ${dir}: rename ${file}`);
    migrations.push({ version, name: file, sql: await readFile(path.join(dir, file), 'utf8') });
  }
  return migrations;
}

async function exists(client: PoolClient, relation: string): Promise<boolean> {
  const { rows } = await client.query<{ found: string | null }>('SELECT to_regclass($1::text)::text AS found', [relation]);
  return rows[0]?.found !== null && rows[0]?.found !== undefined;
}

async function run(client: PoolClient, label: string, sql: string): Promise<void> {
  try {
    await client.query(sql);
  } catch (error) {
    throw new Error(`Migration ${label} failed: ${(error as Error).message}`, { cause: error });
  }
}

/** Applies what is pending; `applied` lists what this call applied (empty when up to date). */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<MigrateResult> {
  const schema = schemaIdentifier(options.schema ?? DEFAULT_SCHEMA);
  const sets = options.sets ?? [];
  for (const set of sets) {
    if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(set.name) || set.name === FRAMEWORK_SET) throw new Error(`invalid migration set name "${set.name}"`);
  }
  const framework = (await loadMigrations(MIGRATIONS_DIR)).map((m) => ({ ...m, sql: m.sql.replace(PLACEHOLDER, schema) }));
  const client = await pool.connect();
  const applied: string[] = [];
  let upgradedLegacy = false;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryLockKey(schema, 'migrate')]);
    const legacy = (await exists(client, 'public.oncehook_migrations')) && !(await exists(client, `${schema}.events`));
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`
      CREATE TABLE IF NOT EXISTS ${schema}.migrations (
        set_name   text not null,
        version    integer not null,
        name       text not null,
        applied_at timestamptz not null default now(),
        primary key (set_name, version)
      )`);
    const { rows } = await client.query<{ set_name: string; version: number }>(`SELECT set_name, version FROM ${schema}.migrations`);
    const done = new Set(rows.map((row) => `${row.set_name}/${row.version}`));
    const record = (set: string, migration: Migration) =>
      client.query(`INSERT INTO ${schema}.migrations (set_name, version, name) VALUES ($1::text, $2::int, $3::text)`, [set, migration.version, migration.name]);

    if (legacy) {
      // Bring the old tables to their last shape first, then move them.
      const { rows: old } = await client.query<{ version: number }>('SELECT version FROM public.oncehook_migrations');
      const had = new Set(old.map((row) => row.version));
      for (const migration of await loadMigrations(LEGACY_DIR)) {
        if (had.has(migration.version)) continue;
        await run(client, `legacy/${migration.name}`, migration.sql);
      }
    }
    for (const migration of framework) {
      if (done.has(`${FRAMEWORK_SET}/${migration.version}`)) continue;
      await run(client, `${FRAMEWORK_SET}/${migration.name}`, migration.sql);
      await record(FRAMEWORK_SET, migration);
      applied.push(`${FRAMEWORK_SET}/${migration.name}`);
      if (legacy && migration.version === 1) {
        await run(client, 'legacy-upgrade.sql', (await readFile(LEGACY_UPGRADE_FILE, 'utf8')).replace(PLACEHOLDER, schema));
        upgradedLegacy = true;
      }
    }
    for (const set of sets) {
      for (const migration of await loadMigrations(set.dir)) {
        if (done.has(`${set.name}/${migration.version}`)) continue;
        await run(client, `${set.name}/${migration.name}`, migration.sql);
        await record(set.name, migration);
        applied.push(`${set.name}/${migration.name}`);
      }
    }
    await client.query('COMMIT');
    return { applied, upgradedLegacy };
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
  // A connection lost between the two statements fails the next one; never an unhandled 'error'.
  client.on('error', () => {});
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
