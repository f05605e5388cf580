/**
 * Databases of the tests' and scripts' own, on the shared server or on one of their own: the
 * one place they are created and dropped (the test files' clones of the migrated template, the
 * template itself, the chaos run's, the bench's, the attack scenarios', the schema dump's).
 * The published test kit keeps its own naming and leftover rules (@oncehook/testkit
 * scratch-databases.ts: it may not depend on this private package); both open their admin
 * connection with @oncehook/shared's withAdminConnection.
 */
import { randomBytes } from 'node:crypto';
import { withAdminConnection } from '@oncehook/shared';
import type pg from 'pg';
import { ADMIN_URL, urlFor } from './db-urls.js';

/** Runs fn on a connection to the server's `postgres` database. */
export function withAdmin<T>(fn: (client: pg.Client) => Promise<T>, adminUrl = ADMIN_URL): Promise<T> {
  return withAdminConnection(adminUrl, fn);
}

export interface ScratchDatabase {
  name: string;
  url: string;
  /** DROP DATABASE ... WITH (FORCE): its connections are ended. */
  drop(): Promise<void>;
}

export interface ScratchDatabaseOptions {
  /** Its name (default: `prefix` and a random suffix). */
  name?: string;
  /** Default `oncehook_empty`. */
  prefix?: string;
  /** A database to clone (CREATE DATABASE ... TEMPLATE): milliseconds, where migrating takes seconds. */
  template?: string;
  /** A server of the caller's own (`postgres://...:port`, no database); default: the shared one. */
  baseUrl?: string;
}

/** A database of the caller's own, empty or cloned from a template. */
export async function createScratchDatabase(options: ScratchDatabaseOptions = {}): Promise<ScratchDatabase> {
  const name = options.name ?? `${options.prefix ?? 'oncehook_empty'}_${randomBytes(6).toString('hex')}`;
  const adminUrl = options.baseUrl ? `${options.baseUrl}/postgres` : ADMIN_URL;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}${options.template ? ` TEMPLATE ${options.template}` : ''}`), adminUrl);
  return {
    name,
    url: options.baseUrl ? `${options.baseUrl}/${name}` : urlFor(name),
    drop: () => dropScratchDatabase(name, options.baseUrl),
  };
}

/** Drops a database by name (a script's leftover, or one whose handle is gone). */
export async function dropScratchDatabase(name: string, baseUrl?: string): Promise<void> {
  await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`), baseUrl ? `${baseUrl}/postgres` : ADMIN_URL);
}
