/**
 * How the command names a database or a Redis in what it prints: host, port and database,
 * never the user or the password; the one line it prints when a database does not answer,
 * instead of a driver's stack trace; and the connections an operator command works through.
 */
import { hostname, userInfo } from 'node:os';
import { closeQueueConnection, createEventQueues, createOperations, createQueries, openQueueConnection, type Operations, type Queries } from '@oncehook/core';
import { createPool, StartupError, type Pool } from '@oncehook/shared';
import { loadCommonConfig, type CommonConfig } from '../config.js';

/** `host:port` of a URL, with its database (`/oncehook`, Redis's `/2`) when it names one; never credentials. */
export function where(url: string): string {
  try {
    const u = new URL(url);
    const redis = u.protocol.startsWith('redis');
    const port = u.port || (redis ? '6379' : '5432');
    const database = u.pathname.replace(/^\//, '');
    // Redis's database 0 is the default: named only when it is another.
    const named = database !== '' && !(redis && database === '0');
    return `${u.hostname}:${port}${named ? `/${database}` : ''}`;
  } catch {
    return 'an unparsable URL';
  }
}

/** The error codes of a database that is not there for us: down, refusing, unknown, starting or stopping. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH']);
const POSTGRES_REFUSALS: Record<string, string> = {
  '57P03': 'it is starting up or shutting down',
  '28P01': 'the password was refused',
  '28000': 'the user is not allowed in',
  '3D000': 'the database does not exist (oncehook migrate creates it)',
  '53300': 'it has too many connections',
};

function codeOf(error: unknown): string | undefined {
  const e = error as { code?: string; errors?: { code?: string }[] };
  return e?.code ?? e?.errors?.find((inner) => inner.code)?.code;
}

/**
 * The one line for an operator command whose database does not answer (a StartupError: printed
 * as it is, exit 1), or null when the error is something else.
 */
export function databaseUnreachable(error: unknown, databaseUrl: string, variable = 'DATABASE_URL'): StartupError | null {
  const code = codeOf(error);
  const message = error instanceof Error ? error.message : String(error);
  let why: string | undefined;
  if (code && POSTGRES_REFUSALS[code]) why = POSTGRES_REFUSALS[code];
  else if (code && UNREACHABLE.has(code)) why = code === 'ECONNREFUSED' ? 'nothing accepts connections there' : code;
  else if (/timeout exceeded when trying to connect|Connection terminated/.test(message)) why = 'it did not answer in time';
  if (!why) return null;
  return new StartupError(`cannot reach Postgres at ${where(databaseUrl)} (${variable}): ${why}${code ? ` (${code})` : ''}. Start it, or point ${variable} at it`);
}

/** What an operator command works with, open for the length of `work`. */
export interface OperatorConnections {
  config: CommonConfig;
  pool: Pool;
  queries: Queries;
  ops: Operations;
  /** The event queue (a command that enqueues on its own: backfill). */
  queue: ReturnType<typeof createEventQueues>;
}

/**
 * Opens Postgres and the queue for one operator command, runs `work`, and closes them whatever
 * happens; a database that does not answer becomes the one line of `databaseUnreachable`.
 */
export async function withOperations<T>(env: Record<string, string | undefined>, work: (connections: OperatorConnections) => Promise<T>): Promise<T> {
  const config = loadCommonConfig(env);
  const pool = createPool(config.DATABASE_URL, { max: 2, applicationName: 'oncehook-cli' });
  const queueStore = openQueueConnection(config, 'producer');
  const queue = createEventQueues(queueStore, config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  const queries = createQueries(config.ONCEHOOK_SCHEMA);
  try {
    return await work({ config, pool, queries, ops: createOperations({ pool, queries, queue }), queue });
  } catch (error) {
    throw databaseUnreachable(error, config.DATABASE_URL) ?? error;
  } finally {
    await queue.close();
    await closeQueueConnection(queueStore);
    await pool.end();
  }
}

/**
 * Who an operator action is recorded as by default (`--actor` says otherwise): the login name
 * (USER, LOGNAME), else the operating system's account with the host (a container has no USER),
 * never a bare "cli".
 */
export function operatorName(env: Record<string, string | undefined>): string {
  const user = env.USER ?? env.LOGNAME;
  if (user) return user;
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return `unknown@${hostname()}`;
  }
}
