/**
 * The retry policy of handler runs, in one place: how many attempts a run gets, what an error
 * means for it, and how long the next attempt waits. The state machine (process-event.ts) asks
 * it for a verdict; the worker (event-worker.ts) asks it for the delay; nothing else decides.
 *
 *   attempts        a lease taken counts as an attempt, crashes included (the lease statement
 *                   counts it), so a run that kills its worker every time still ends
 *   give up         a run leased for attempt maxAttempts + 1 (the previous ones died without a
 *                   verdict) is failed without running the handler
 *   verdict         a PermanentError (from any copy of the SDK: a brand, not a class) or
 *                   BullMQ's UnrecoverableError fails the run at once; any other error retries,
 *                   until attempt maxAttempts, which fails it
 *   delay           before attempt n+1: backoffMs x 2^(n-1), capped at 10 minutes, half jitter
 *                   (the SDK's backoff.ts computes it); at least what a RetryLaterError asked
 *                   for (an API's Retry-After), within the same cap
 *
 * A policy is a value: the worker builds one from MAX_ATTEMPTS and RETRY_BACKOFF_MS, and a
 * handler may bring its own (`retries` in defineHandler): `policyFor` merges the two, here and
 * nowhere else; the run's verdicts and its next attempt's delay both come from the merged one.
 */
import { isPermanentError, retryLaterMs } from '@oncehook/sdk';
import { backoffDelayMs } from '@oncehook/sdk/internal';

/** Longest wait between two attempts of a run, before jitter. */
export const RUN_RETRY_CAP_MS = 10 * 60_000;

export interface RetryPolicy {
  /** Attempts a run gets before it is failed (MAX_ATTEMPTS). */
  readonly maxAttempts: number;
  /** Delay before the first retry, before jitter (RETRY_BACKOFF_MS); doubles per attempt. */
  readonly backoffMs: number;
}

/** The policy of one handler's runs: its own `retries` over the worker's (MAX_ATTEMPTS, RETRY_BACKOFF_MS). */
export function policyFor(global: RetryPolicy, handler: { readonly retries?: Partial<RetryPolicy> } | undefined): RetryPolicy {
  // mutant: handler-retries-ignored
  const own = handler?.retries;
  return own ? { maxAttempts: own.maxAttempts ?? global.maxAttempts, backoffMs: own.backoffMs ?? global.backoffMs } : global;
}

export type Verdict = { retry: true } | { retry: false; reason: string };

/** A run leased for this attempt has had every attempt already (they died without a verdict). */
export function attemptsExhausted(policy: RetryPolicy, attempt: number): boolean {
  // mutant: cap-off
  return attempt > policy.maxAttempts;
}

/** BullMQ's "never retry this job" error, recognised by name (its class may be another copy). */
function isUnrecoverable(error: unknown): boolean {
  return error instanceof Error && error.name === 'UnrecoverableError';
}

/**
 * What attempt `attempt` failing with `error` (described as `message`) means for the run: retry
 * later, or fail now with the reason to record.
 */
export function verdictFor(policy: RetryPolicy, attempt: number, error: unknown, message: string): Verdict {
  if (isPermanentError(error) || isUnrecoverable(error)) return { retry: false, reason: message };
  // mutant: cap-last-attempt
  if (attempt >= policy.maxAttempts) return { retry: false, reason: `attempt ${attempt}/${policy.maxAttempts} failed: ${message}` };
  return { retry: true };
}

/** The same, for a problem that is no error object (a handler this worker does not have). */
export function verdictForProblem(policy: RetryPolicy, attempt: number, problem: string): Verdict {
  return attempt >= policy.maxAttempts ? { retry: false, reason: problem } : { retry: true };
}

/**
 * Delay before the attempt after failed attempt `failedAttempt`: the backoff, or longer when
 * the error asked for more (a RetryLaterError: the API's Retry-After), up to RUN_RETRY_CAP_MS.
 */
export function retryDelayMs(policy: RetryPolicy, failedAttempt: number, error?: unknown): number {
  // mutant: backoff-zero
  const backoff = backoffDelayMs(failedAttempt, { baseMs: policy.backoffMs, capMs: RUN_RETRY_CAP_MS, jitter: 'half' });
  const asked = retryLaterMs(error);
  return asked === null ? backoff : Math.max(backoff, Math.min(asked, RUN_RETRY_CAP_MS));
}
