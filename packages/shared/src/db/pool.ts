import pg from 'pg';

// bigint (int8) columns come back as strings by default; our ids fit in a JS number
// comfortably (2^53), and numbers are what the rest of the code compares.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number.parseInt(value, 10));

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface PoolOptions {
  max?: number;
  /** Fail fast when Postgres is unreachable instead of queueing requests behind a dead server. */
  connectionTimeoutMillis?: number;
  applicationName?: string;
  /** Called once per statement sent on any of the pool's connections (oncehook_db_statements_total). */
  onStatement?: () => void;
}

export function createPool(connectionString: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 2_000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? 'oncehook',
  });
  // An idle client losing its connection (Postgres restarted) emits 'error' on the pool; without
  // a listener that would crash the process. The next query simply gets a fresh connection.
  pool.on('error', () => {});
  // The pool listens for errors only on IDLE clients: it removes its listener while a client is
  // checked out. A connection lost while checked out but between statements (Postgres restarted
  // while a step's transaction waits for a handler's outbound call, or while the reconciler's
  // leader waits for Redis) emits 'error' with nobody listening, and that kills the process:
  // every worker at once in the chaos run, at its Postgres restart. With this listener the
  // client's next statement fails instead, and the transaction's own error handling applies
  // (rolled back, the client destroyed, the work retried).
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const { onStatement } = options;
  if (onStatement) {
    // pool.query goes through client.query too, so wrapping each new connection's query counts
    // every statement the process sends (transactions' BEGIN and COMMIT included).
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        onStatement();
        return query(...args);
      };
    });
  }
  return pool;
}

/** Runs fn inside BEGIN/COMMIT on one client; rolls back and rethrows on error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // A failed ROLLBACK means the connection is broken: destroy it rather than reuse it.
    broken = await client.query('ROLLBACK').then(
      () => false,
      () => true,
    );
    throw error;
  } finally {
    client.release(broken);
  }
}
