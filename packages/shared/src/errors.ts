/**
 * The errors of Oncehook's processes (the edge, start-up), not of handler code: those are the
 * SDK's (@oncehook/sdk: PermanentError, ConfigError, LeaseLostError, ...), branded so that a
 * second copy of the SDK is still recognised. Each says what the caller should do about it.
 */

/**
 * The process cannot start where it is (a port in use, a dependency unreachable): its message
 * names the cause and the variable to change, and is printed as one line, without a stack.
 */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** A listen error, as a StartupError naming the variable that chose the port (or the error itself). */
export function listenFailure(error: unknown, port: number, variable: string): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') return new StartupError(`port ${port} is already in use (${variable}): stop what uses it, or set ${variable} to a free port`);
  if (code === 'EACCES') return new StartupError(`not allowed to listen on port ${port} (${variable}): choose a port above 1024`);
  if (code === 'EADDRNOTAVAIL') return new StartupError(`cannot listen on that address for port ${port}: check HOST / METRICS_HOST`);
  return error;
}

/**
 * Ingest cannot take a delivery right now: too many waiting for the database, too many bytes in
 * flight, or the database failing (circuit open). Answered 503 with Retry-After at once, before
 * anything is stored: the provider retries later, nothing is lost.
 */
export class OverloadedError extends Error {
  override name = 'OverloadedError';
}

export type VerificationReason =
  | 'missing_header'
  | 'malformed_header'
  | 'bad_signature'
  /** A token or Basic-auth sender (GitLab, Postmark) without the configured credentials. */
  | 'bad_credentials'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'malformed_payload'
  | 'payload_limit'
  | 'invalid_event_id';

/**
 * A delivery is not acceptable as sent. `status` is what the edge answers (400: malformed;
 * 401: well-formed but not authentic or not fresh); `reason` is a stable code for metrics and
 * logs; the message says exactly what was wrong, for the sender's developer. Nothing is stored
 * for a delivery that fails verification.
 */
export class VerificationError extends Error {
  override name = 'VerificationError';
  constructor(
    readonly status: 400 | 401,
    readonly reason: VerificationReason,
    message: string,
  ) {
    super(message);
  }
}

/** "Name: message" for logs and the `last_error` column. */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
