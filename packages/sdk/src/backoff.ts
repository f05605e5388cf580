/**
 * The one place retry delays are computed: exponential growth from `baseMs`, capped, with
 * jitter so that many retries scheduled at once do not arrive at once. Used by the outbound
 * client's quick tries (here) and by the engine's retry policy for a run's next attempt
 * (@oncehook/core, retry-policy.ts).
 *
 * - `half` jitter (the delay is in [0.5, 1] x the exponential): for a run's next attempt, which
 *   should not come much sooner than planned (a downstream outage gets its breathing room).
 * - `full` jitter (in [0, 1] x): for the outbound client's quick tries, where spreading
 *   concurrent callers matters more than the lower bound (AWS's "full jitter").
 */
export interface BackoffOptions {
  /** Delay of the first retry (attempt 1), before jitter. */
  baseMs: number;
  /** Upper bound, before jitter. */
  capMs: number;
  jitter: 'half' | 'full';
}

/** Delay before retry number `attempt` (1 = the first retry). */
export function backoffDelayMs(attempt: number, options: BackoffOptions): number {
  const exponential = Math.min(options.baseMs * 2 ** Math.max(0, attempt - 1), options.capMs);
  const factor = options.jitter === 'half' ? 0.5 + Math.random() * 0.5 : Math.random();
  return Math.round(exponential * factor);
}
