/**
 * Every error class Oncehook throws or asks handlers to throw, in one place. Each says what
 * the caller should do about it. The public ones are re-exported by `@oncehook/sdk`.
 */

/** The environment (or a sources file, or a handler's settings) is invalid. Fix it and restart. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

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
 * Throw from a handler (or let an outbound client throw it) when retrying cannot help: bad
 * data, a 4xx from a downstream API. The handler's run goes straight to `failed` with this
 * message, where an operator can inspect, fix and re-drive or replay it.
 */
export class PermanentError extends Error {
  override name = 'PermanentError';
}

/**
 * Our lease on a handler run was taken over (it expired and another worker claimed it) or
 * released by the reconciler. Stop working immediately and commit nothing: the new owner
 * finishes the run. Not a failure of the event.
 */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor(readonly runId: number) {
    super(`lease on handler run ${runId} was lost (expired and taken over); stopping without committing`);
  }
}

/**
 * A handler used its context wrongly: a step name reused in one run, a step result that is not
 * plain JSON, an invalid step name. A bug in the handler's code, so retrying cannot help: the
 * run fails at once with this message (a PermanentError), nothing of the step is recorded.
 */
export class StepUsageError extends PermanentError {
  override name = 'StepUsageError';
}

/** `defineHandler` (or a handler module) was given something it cannot use. Fix the code. */
export class HandlerDefinitionError extends Error {
  override name = 'HandlerDefinitionError';
}

/**
 * A retryable outbound failure (network error, timeout, 409/429/5xx) outlived the client's
 * tries. The step fails; the run is retried later with the SAME idempotency key.
 */
export class OutboundUnavailableError extends Error {
  override name = 'OutboundUnavailableError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
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
