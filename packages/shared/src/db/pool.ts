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
  /** Called once per round trip (a query call; a pipelined one carries several statements): oncehook_db_round_trips_total. */
  onRoundTrip?: () => void;
  /** Session timeouts, set at connect (Postgres cancels past them): the admin's pool has all three. */
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
}

export function createPool(connectionString: string, options: PoolOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 2_000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? 'oncehook',
    ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
    ...(options.lockTimeoutMs ? { lock_timeout: options.lockTimeoutMs } : {}),
    ...(options.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs } : {}),
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
    // mutant: checked-out-client-unlistened
    client.on('error', () => {});
  });
  const { onStatement, onRoundTrip } = options;
  if (onStatement || onRoundTrip) {
    // pool.query goes through client.query too, so wrapping each new connection's query counts
    // every statement the process sends (transactions' BEGIN and COMMIT included).
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        // A pipelined round trip (BeginThen, ThenCommit) counts each statement it carries.
        const carried = (args[0] as { statements?: unknown } | undefined)?.statements;
        if (onStatement) for (let i = 0; i < (typeof carried === 'number' ? carried : 1); i += 1) onStatement();
        onRoundTrip?.();
        return query(...args);
      };
    });
  }
  return pool;
}

/** Runs fn inside BEGIN/COMMIT on one client; rolls back and rethrows on error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return inTransaction(pool, async (client) => {
    await client.query('BEGIN');
    return fn(client);
  });
}

/** A named prepared statement (store/prepared.ts builds them). */
export interface PreparedStatement {
  name: string;
  text: string;
  values: unknown[];
}

/**
 * withTransaction whose BEGIN travels with its first statement, a prepared one, in ONE round
 * trip (beginWith); fn gets that statement's result, and may end the transaction itself with
 * commitWith (its last statement and COMMIT in one round trip). The worker's step transactions
 * do both: BEGIN with the fence, the step's record with COMMIT (docs/benchmarks.md: two round
 * trips less per event).
 */
export async function withTransactionFrom<R extends pg.QueryResultRow, T>(
  pool: pg.Pool,
  first: PreparedStatement,
  fn: (client: pg.PoolClient, first: pg.QueryResult<R>) => Promise<T>,
): Promise<T> {
  return inTransaction(pool, async (client) => fn(client, await beginWith<R>(client, first)));
}

/** Clients whose transaction commitWith ended: inTransaction sends no COMMIT of its own. */
const committedBy = new WeakSet<pg.ClientBase>();

/**
 * COMMIT after body (unless body ended with commitWith), ROLLBACK on its error; the client
 * destroyed when even ROLLBACK fails.
 */
async function inTransaction<T>(pool: pg.Pool, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  committedBy.delete(client);
  let broken = false;
  try {
    const result = await body(client);
    if (!committedBy.delete(client)) await client.query('COMMIT');
    return result;
  } catch (error) {
    // A failed ROLLBACK means the connection is broken: destroy it rather than reuse it. After
    // a failed beginWith the transaction may not have begun: ROLLBACK then only warns.
    broken = await client.query('ROLLBACK').then(
      () => false,
      () => true,
    );
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Whether this pg has the Query internals BeginThen and ThenCommit build on (pg 8.23: its
 * `prepare`, `_getRows`, and `hasBeenParsed` reading `submittedNamedStatements`). Checked once
 * at load; without them beginWith and commitWith send their statements one round trip each,
 * with the same meaning (docs/dependencies.md, `pg`).
 */
const queryInternals = pg.Query.prototype as unknown as Record<string, unknown>;
export const PIPELINED_TRANSACTIONS: boolean =
  typeof queryInternals.prepare === 'function' &&
  typeof queryInternals._getRows === 'function' &&
  typeof queryInternals.hasBeenParsed === 'function' &&
  String(queryInternals.hasBeenParsed).includes('submittedNamedStatements');

/** The protocol connection pg hands a query to submit (pg-protocol's, untyped in @types/pg). */
interface ProtocolConnection {
  parse(query: { text: string; name?: string }): void;
  bind(config?: object): void;
  execute(config?: object): void;
  submittedNamedStatements: Record<string, string>;
}

/**
 * BEGIN and a named prepared statement in ONE round trip: the extended protocol lets a client
 * send several statements before its Sync (pipelining), and Postgres runs them in order; pg
 * itself waits for ReadyForQuery between two queries, so `BEGIN` then the statement would be
 * two. Sent as: [Parse of the statement, the first time on this connection], Parse/Bind/Execute
 * of BEGIN (the unnamed statement: a utility command, nothing to plan), Bind/Describe/Execute of
 * the statement, one Sync. The statement's Parse goes FIRST: pg marks a name parsed on any
 * ParseComplete of the query, and BEGIN's must not vouch for a statement whose own Parse failed.
 * The statement stays prepared (planned once per connection): sending `BEGIN; SELECT ...` as
 * one simple-protocol text instead re-planned it every time and cost more than the round trip
 * saved (measured: docs/benchmarks.md). An error in either skips the rest up to the Sync, and
 * the query fails; the caller rolls back (a transaction BEGIN opened is then aborted).
 */
class BeginThen extends pg.Query {
  /** Statements this one round trip carries (createPool's onStatement counts each). */
  readonly statements = 2;

  prepare(connection: ProtocolConnection): void {
    const self = this as unknown as { name: string; text: string; hasBeenParsed(c: ProtocolConnection): boolean };
    // mutant: fence-without-begin, begin-parse-vouches
    if (!self.hasBeenParsed(connection)) {
      connection.parse({ text: self.text, name: self.name });
      connection.submittedNamedStatements[self.name] = self.text;
    }
    connection.parse({ text: 'BEGIN' });
    connection.bind();
    connection.execute();
    // pg's own: Bind, Describe, Execute and Sync of the statement (its Parse is skipped, sent above).
    (pg.Query.prototype as unknown as { prepare(c: ProtocolConnection): void }).prepare.call(this, connection);
  }
}

/** Sends BEGIN and `statement` in one round trip (BeginThen); resolves to the statement's result. */
export async function beginWith<R extends pg.QueryResultRow>(client: pg.ClientBase, statement: PreparedStatement): Promise<pg.QueryResult<R>> {
  if (!PIPELINED_TRANSACTIONS) {
    await client.query('BEGIN');
    return client.query<R>(statement);
  }
  return new Promise((resolve, reject) => {
    const query = new BeginThen(statement, undefined, (error: Error | undefined, results: unknown) => {
      if (error) return reject(error);
      // Two command completions (BEGIN's, then the statement's): pg returns both, in order.
      const all = (Array.isArray(results) ? results : [results]) as pg.QueryResult<R>[];
      const last = all[all.length - 1];
      if (all.length !== 2 || all[0]?.command !== 'BEGIN' || !last)
        return reject(new Error(`beginWith: expected BEGIN and one statement, got ${all.map((r) => r.command).join(', ')}`));
      resolve(last);
    });
    client.query(query);
  });
}

/**
 * A named prepared statement and COMMIT in ONE round trip: Bind/Describe/Execute of the
 * statement (its Parse first, the first time on this connection), Parse/Bind/Execute of
 * COMMIT, one Sync. If the statement fails, Postgres skips everything up to the Sync, the
 * COMMIT included: the transaction stays aborted and the caller's ROLLBACK ends it. So a
 * statement that must not commit when its guard fails has to fail, not return 0 rows.
 */
class ThenCommit extends pg.Query {
  /** Statements this one round trip carries (createPool's onStatement counts each). */
  readonly statements = 2;

  /** pg's own, called by its prepare after the statement's Bind and Describe: Execute, then COMMIT's messages, then Sync. */
  _getRows(connection: ProtocolConnection & { sync(): void }, rows?: number): void {
    connection.execute({ portal: (this as unknown as { portal?: string }).portal, rows });
    connection.parse({ text: 'COMMIT' });
    connection.bind();
    connection.execute();
    connection.sync();
  }
}

/**
 * Sends `statement` and COMMIT in one round trip (ThenCommit) on a client inside
 * withTransaction/withTransactionFrom, which then sends no COMMIT of its own; resolves to the
 * statement's result once the transaction committed. Rejects with the statement's error
 * (nothing committed), or with COMMIT's.
 */
export async function commitWith<R extends pg.QueryResultRow>(client: pg.ClientBase, statement: PreparedStatement): Promise<pg.QueryResult<R>> {
  if (!PIPELINED_TRANSACTIONS) {
    const result = await client.query<R>(statement);
    await client.query('COMMIT');
    committedBy.add(client);
    return result;
  }
  return new Promise((resolve, reject) => {
    const query = new ThenCommit(statement, undefined, (error: Error | undefined, results: unknown) => {
      if (error) return reject(error);
      const all = (Array.isArray(results) ? results : [results]) as pg.QueryResult<R>[];
      const [first, commit] = all;
      // COMMIT of an aborted transaction answers ROLLBACK (no error): not committed.
      if (all.length !== 2 || !first || commit?.command !== 'COMMIT')
        return reject(new Error(`commitWith: the transaction did not commit (${all.map((r) => r.command).join(', ')})`));
      committedBy.add(client);
      resolve(first);
    });
    client.query(query);
  });
}
