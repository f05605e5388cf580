/**
 * Postgres error codes we branch on, by name (https://www.postgresql.org/docs/15/errcodes-appendix.html),
 * and the question every caller asks: is this worth retrying?
 */
export const PG_UNIQUE_VIOLATION = '23505';
export const PG_FOREIGN_KEY_VIOLATION = '23503';
export const PG_SERIALIZATION_FAILURE = '40001';
export const PG_DEADLOCK_DETECTED = '40P01';
export const PG_LOCK_NOT_AVAILABLE = '55P03';
export const PG_QUERY_CANCELED = '57014';
export const PG_ADMIN_SHUTDOWN = '57P01';
export const PG_CRASH_SHUTDOWN = '57P02';
export const PG_CANNOT_CONNECT_NOW = '57P03';
export const PG_TOO_MANY_CONNECTIONS = '53300';
export const PG_UNDEFINED_TABLE = '42P01';
export const PG_INVALID_CATALOG_NAME = '3D000';
export const PG_DUPLICATE_DATABASE = '42P04';
/** jsonb cannot store \u0000 in a string. */
export const PG_UNTRANSLATABLE_CHARACTER = '22P05';
export const PG_INVALID_TEXT_REPRESENTATION = '22P02';
export const PG_DATETIME_FIELD_OVERFLOW = '22008';
export const PG_INVALID_DATETIME_FORMAT = '22007';
export const PG_NUMERIC_VALUE_OUT_OF_RANGE = '22003';
/** jsonb nesting deeper than the server's stack allows. */
export const PG_STATEMENT_TOO_COMPLEX = '54001';

/** Transaction conflicts: retry the whole transaction. */
const RETRYABLE_TRANSACTION_CODES = new Set([PG_SERIALIZATION_FAILURE, PG_DEADLOCK_DETECTED, PG_LOCK_NOT_AVAILABLE]);

/** The server is going away or refusing connections: retry later, the data is fine. */
const UNAVAILABLE_CODES = new Set([PG_ADMIN_SHUTDOWN, PG_CRASH_SHUTDOWN, PG_CANNOT_CONNECT_NOW, PG_TOO_MANY_CONNECTIONS, PG_QUERY_CANCELED]);

/** Node socket errors seen when Postgres is down or unreachable. */
const NETWORK_ERROR_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);

function codeOf(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') return error.code;
  return undefined;
}

/**
 * The delivery itself cannot be stored: a data exception (SQLSTATE class 22: jsonb refusing a
 * \u0000, a time out of range, a number too large) or jsonb nested deeper than the server
 * allows (54001). Retrying the same bytes can never succeed: the edge answers 400 for that
 * delivery alone, not 5xx.
 */
export function isUnstorablePayloadError(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (code.startsWith('22') || code === PG_STATEMENT_TOO_COMPLEX);
}

export function isRetryableTransactionError(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && RETRYABLE_TRANSACTION_CODES.has(code);
}

/**
 * A claim statement that lost a race, to run again as it is: a transaction conflict (above),
 * or a foreign key violation, which in the claim can only be a duplicate's delivery-log row
 * whose event the key-horizon retention deleted between the statement's snapshot and its
 * insert. Run again, the claim sees the key gone and answers for what the database now holds.
 */
export function isClaimConflictError(error: unknown): boolean {
  return isRetryableTransactionError(error) || codeOf(error) === PG_FOREIGN_KEY_VIOLATION;
}

/**
 * True when the database (not the query) is the problem: down, restarting, refusing, or the
 * connection was lost or timed out. Ingest answers these with 503 + Retry-After.
 */
export function isDatabaseUnavailableError(error: unknown): boolean {
  const code = codeOf(error);
  if (code !== undefined && (UNAVAILABLE_CODES.has(code) || NETWORK_ERROR_CODES.has(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isDatabaseUnavailableError);
  const message = error instanceof Error ? error.message : '';
  // pg reports these without a code.
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|connect ECONNREFUSED/i.test(message);
}
