/**
 * The claim's circuit breaker (part of the edge's backpressure, claim-batcher.ts): after
 * `failures` batches in a row find the database unavailable (or silent), the circuit opens for
 * `openMs` and every claim fails at once (503) instead of waiting out a timeout; then one batch
 * goes through (half-open) and its success closes it. It answers no delivery itself: the
 * batcher asks it the state and tells it each batch's outcome.
 */
import type { Logger } from '@oncehook/shared';

export type CircuitState = 'closed' | 'open' | 'half-open';

export interface ClaimCircuit {
  state(): CircuitState;
  /**
   * Records one batch's outcome; true when this outcome opened (or re-opened) the circuit, so
   * the caller fails everything waiting.
   */
  record(unavailable: boolean): boolean;
}

export function createClaimCircuit(options: { failures: number; openMs: number; now: () => number; log: Logger }): ClaimCircuit {
  let failures = 0;
  let openUntil = 0;
  const state = (): CircuitState => (openUntil === 0 ? 'closed' : options.now() < openUntil ? 'open' : 'half-open');
  return {
    state,
    record(unavailable) {
      if (!unavailable) {
        failures = 0;
        openUntil = 0;
        return false;
      }
      failures += 1;
      // The count resets only on a success, so a half-open probe that fails is still at or over
      // the threshold: it re-opens the circuit at once (claim-circuit.test.ts).
      // mutant: claim-circuit-never-opens
      if (failures < options.failures) return false;
      if (state() !== 'open') options.log.warn({ failures, openMs: options.openMs }, 'database unavailable: circuit open, answering 503 at once');
      openUntil = options.now() + options.openMs;
      return true;
    },
  };
}
