/**
 * The errors handler code throws, or is told to stop with. Each says what to do about it.
 *
 * Branded, not matched by class identity. A team's project often ends up with two copies of
 * this package (its own, and the one the worker was installed with, or a bundled one): an
 * `instanceof` against the worker's class would not recognise the handler's error, and a
 * PermanentError (an API's 422) would be retried for minutes instead of failing at once. So
 * every instance carries its kinds under `Symbol.for('oncehook.error.kinds')`, a key shared by
 * every copy, and the engine asks `isPermanentError(error)` and friends. `instanceof` works
 * across copies too (each class's Symbol.hasInstance checks the brand); a class of yours that
 * extends one of these keeps ordinary `instanceof` semantics for itself.
 */

// mutant: error-brand-per-copy
const KINDS = Symbol.for('oncehook.error.kinds');

type ErrorKind = 'config' | 'permanent' | 'lease-lost' | 'step-usage' | 'handler-definition' | 'outbound-unavailable' | 'retry-later';

/** True when `value` is an error of `kind`, from any copy of the SDK. */
function hasKind(value: unknown, kind: ErrorKind): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const kinds = (value as { [KINDS]?: unknown })[KINDS];
  return Array.isArray(kinds) && kinds.includes(kind);
}

/** Stamps the kinds of the constructed class and its Oncehook ancestors on the instance. */
function stamp(error: Error, target: unknown): void {
  const kinds: string[] = [];
  for (let c = target as { kind?: string } | null; c && c !== Error; c = Object.getPrototypeOf(c)) {
    if (Object.hasOwn(c, 'kind') && typeof c.kind === 'string') kinds.push(c.kind);
  }
  Object.defineProperty(error, KINDS, { value: kinds, enumerable: false });
}

/** instanceof by brand for our own classes; ordinary instanceof for subclasses of yours. */
function brandedInstanceOf(this: { kind?: ErrorKind }, value: unknown): boolean {
  if (Object.hasOwn(this, 'kind') && this.kind) return hasKind(value, this.kind);
  return Function.prototype[Symbol.hasInstance].call(this, value);
}

/** The environment (or a sources file, or a handler's settings) is invalid. Fix it and restart. */
export class ConfigError extends Error {
  static readonly kind: ErrorKind = 'config';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'ConfigError';
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    stamp(this, new.target);
  }
}

/**
 * Throw from a handler (or let an outbound client throw it) when retrying cannot help: bad
 * data, a 4xx from a downstream API. The handler's run goes straight to `failed` with this
 * message, where an operator can inspect, fix and re-drive or replay it.
 */
export class PermanentError extends Error {
  static readonly kind: ErrorKind = 'permanent';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'PermanentError';
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    stamp(this, new.target);
  }
}

/**
 * Our lease on a handler run was taken over (it expired and another worker claimed it) or
 * released by the reconciler. Stop working immediately and commit nothing: the new owner
 * finishes the run. Not a failure of the event.
 */
export class LeaseLostError extends Error {
  static readonly kind: ErrorKind = 'lease-lost';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'LeaseLostError';
  constructor(
    readonly runId: number,
    /** Why: taken over by default; the lease clock says when renewals failed for too long. */
    reason = 'expired and taken over',
  ) {
    super(`lease on handler run ${runId} was lost (${reason}); stopping without committing`);
    stamp(this, new.target);
  }
}

/**
 * A handler used its context wrongly: a step name reused in one run, a step result that is not
 * plain JSON, an invalid step name. A bug in the handler's code, so retrying cannot help: the
 * run fails at once with this message (a PermanentError), nothing of the step is recorded.
 */
export class StepUsageError extends PermanentError {
  static override readonly kind: ErrorKind = 'step-usage';
  override name = 'StepUsageError';
}

/** `defineHandler` (or a handler module) was given something it cannot use. Fix the code. */
export class HandlerDefinitionError extends Error {
  static readonly kind: ErrorKind = 'handler-definition';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'HandlerDefinitionError';
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    stamp(this, new.target);
  }
}

/**
 * A retryable outbound failure (network error, timeout, 409/429/5xx) outlived the client's
 * tries. The step fails; the run is retried later with the SAME idempotency key.
 */
export class OutboundUnavailableError extends Error {
  static readonly kind: ErrorKind = 'outbound-unavailable';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'OutboundUnavailableError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    stamp(this, new.target);
  }
}

/**
 * Throw from a handler when the API said when to come back (`429` or `503` with `Retry-After`,
 * a maintenance window): the attempt fails like any retryable error, and the next one waits at
 * least `afterMs` (capped at 10 minutes), longer if the handler's backoff says so. It still
 * counts as an attempt.
 */
export class RetryLaterError extends Error {
  static readonly kind: ErrorKind = 'retry-later';
  static override [Symbol.hasInstance] = brandedInstanceOf;
  override name = 'RetryLaterError';
  constructor(
    message: string,
    /** The least time before the next attempt, ms. */
    readonly afterMs: number,
  ) {
    super(message);
    stamp(this, new.target);
  }
}

/** A RetryLaterError from any copy of the SDK: its `afterMs`, else null. */
export function retryLaterMs(error: unknown): number | null {
  if (!hasKind(error, 'retry-later')) return null;
  const afterMs = (error as { afterMs?: unknown }).afterMs;
  return typeof afterMs === 'number' && Number.isFinite(afterMs) && afterMs >= 0 ? afterMs : null;
}

/** A PermanentError (or a StepUsageError) from any copy of the SDK: fail the run at once. */
export const isPermanentError = (error: unknown): boolean => hasKind(error, 'permanent');
/** A LeaseLostError from any copy of the SDK: stop, commit nothing. */
export const isLeaseLostError = (error: unknown): boolean => hasKind(error, 'lease-lost');
/** A ConfigError from any copy of the SDK: a setting is wrong; print the message, exit. */
export const isConfigError = (error: unknown): boolean => hasKind(error, 'config');
/** A HandlerDefinitionError from any copy of the SDK. */
export const isHandlerDefinitionError = (error: unknown): boolean => hasKind(error, 'handler-definition');
