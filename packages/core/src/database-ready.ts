/**
 * Before a process says it is ready: its database exists, takes its credentials, and holds
 * Oncehook's tables, up to date. A mistake (a database name, a password, a forgotten
 * `oncehook migrate`) stops the process at start with one line naming the setting and the fix;
 * a database that cannot be reached (down, restarting, not up yet beside it in compose) is
 * waited for, a line per try, and the process says nothing of being ready until it is: an outage
 * must not kill a process, and a misconfiguration must not look like one.
 */
import { isIP } from 'node:net';
import { DEFAULT_SCHEMA, PG_INVALID_CATALOG_NAME, PG_UNDEFINED_TABLE, schemaIdentifier, StartupError, type Logger } from '@oncehook/shared';
import pg from 'pg';
import { FRAMEWORK_SET, loadMigrations } from './migrate.js';

/** Postgres's codes for credentials refused (28P01 password, 28000 no such role or no pg_hba entry). */
const CREDENTIALS_REFUSED = new Set(['28P01', '28000']);
/** A server that is there but not taking connections yet (starting, recovering, shutting down). */
const NOT_YET = new Set(['57P03', '57P01', '57P02', '53300']);
const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'EPIPE']);

export interface DatabaseReadyOptions {
  schema?: string;
  log: Logger;
  /** Between tries while the database cannot be reached (default 2 s). */
  retryMs?: number;
  /** Longest one try waits to connect (default 5 s). */
  connectTimeoutMs?: number;
  /** Stops waiting (a shutdown signal while the database was down): resolves false. */
  signal?: AbortSignal;
}

/** Where DATABASE_URL points, without its password, for the messages. */
function describeTarget(databaseUrl: string): { database: string; user: string; at: string } {
  try {
    const url = new URL(databaseUrl);
    const host = url.hostname || 'the local socket';
    return {
      database: decodeURIComponent(url.pathname.replace(/^\//, '')) || '(none)',
      user: decodeURIComponent(url.username) || '(default)',
      at: `${isIP(host.replace(/^\[|\]$/g, '')) === 6 ? `[${host}]` : host}:${url.port || '5432'}`,
    };
  } catch {
    return { database: '?', user: '?', at: '?' };
  }
}

/**
 * Resolves once the database answers with Oncehook's tables up to date (true), or when
 * `signal` aborts while waiting (false). Throws StartupError for what waiting cannot fix.
 */
export async function awaitDatabase(databaseUrl: string, options: DatabaseReadyOptions): Promise<boolean> {
  const schema = schemaIdentifier(options.schema ?? DEFAULT_SCHEMA);
  const target = describeTarget(databaseUrl);
  const latest = (await loadMigrations()).at(-1);
  for (let attempt = 1; ; attempt += 1) {
    if (options.signal?.aborted) return false;
    const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query<{ version: number | null }>(`SELECT max(version)::int AS version FROM ${schema}.migrations WHERE set_name = $1::text`, [FRAMEWORK_SET]);
      const version = rows[0]?.version ?? 0;
      if (latest && version < latest.version) {
        throw new StartupError(
          `the database "${target.database}" at ${target.at} has Oncehook's tables at migration ${version}, this version needs ${latest.version} (${latest.name}): run \`oncehook migrate\` first`,
        );
      }
      return true;
    } catch (error) {
      if (error instanceof StartupError) throw error;
      const code = (error as { code?: string }).code ?? '';
      if (code === PG_INVALID_CATALOG_NAME)
        throw new StartupError(
          `DATABASE_URL names the database "${target.database}", which does not exist at ${target.at}: create it and Oncehook's tables with \`oncehook migrate\` (it creates the database), or fix the name in DATABASE_URL`,
        );
      if (CREDENTIALS_REFUSED.has(code))
        throw new StartupError(`DATABASE_URL: Postgres at ${target.at} refused the user "${target.user}" (${(error as Error).message}): fix the user or password in DATABASE_URL`);
      if (code === PG_UNDEFINED_TABLE)
        throw new StartupError(
          `the database "${target.database}" at ${target.at} has no Oncehook tables (schema "${options.schema ?? DEFAULT_SCHEMA}"): run \`oncehook migrate\` first`,
        );
      const waitable = NETWORK.has(code) || NOT_YET.has(code) || /timeout|terminated|Connection terminated/i.test((error as Error).message ?? '');
      if (!waitable) throw error;
      options.log.warn(
        { attempt, error: code || (error as Error).message, at: target.at },
        `waiting for Postgres at ${target.at} (${code || (error as Error).message}${code === 'ENOTFOUND' ? ': is the host in DATABASE_URL right?' : ''}); trying again in ${(options.retryMs ?? 2_000) / 1000} s`,
      );
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, options.retryMs ?? 2_000);
        options.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
    } finally {
      await client.end().catch(() => {});
    }
  }
}
