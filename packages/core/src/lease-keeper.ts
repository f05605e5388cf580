/**
 * Keeps one attempt's lease while its handler runs, and aborts the attempt's signal the moment
 * the lease cannot be trusted: a renewal that finds the lease taken over, or the lease clock
 * (lease-clock.ts) reaching the lease's end minus a margin without a renewal. Every step's
 * `signal` is this one, so calls in flight are abandoned before another worker (or another run
 * of a limited handler) can start.
 *
 * Not while a local step holds the run row (`holdsRunRow`): the renewal would wait for its
 * COMMIT on a pool connection of its own, and the step renews the lease itself
 * (steps/run-fence.ts, renewIfHeldLong).
 */
import type { Faults, Logger, Pool } from '@oncehook/shared';
import { LeaseLostError } from '@oncehook/sdk';
import { leaseMarginMs, startLeaseClock } from './lease-clock.js';
import type { Queries } from './store/queries.js';

export interface LeaseKeeper {
  /** Aborted (with a LeaseLostError) when the lease was lost or was about to run out unrenewed. */
  readonly signal: AbortSignal;
  /** A renewal sent at `sentAt` (performance.now()) committed elsewhere (a step's): the clock moves on. */
  renewed(sentAt: number): void;
  /** The attempt ended: no more renewals, no alarm. */
  stop(): void;
}

export function keepLease(
  deps: { pool: Pool; queries: Queries; faults: Faults; log: Logger },
  lease: { runId: number; token: string; leaseMs: number; leasedAt: number; holdsRunRow: () => boolean },
): LeaseKeeper {
  const { pool, queries, log } = deps;
  const { runId, token, leaseMs, holdsRunRow } = lease;
  const abort = new AbortController();
  const clock = startLeaseClock({
    leasedAt: lease.leasedAt,
    leaseMs,
    holdsRunRow,
    onExpiring: () => {
      if (abort.signal.aborted) return;
      log.warn({ leaseMs }, 'lease not renewed in time; abandoning the calls in flight before it runs out');
      abort.abort(new LeaseLostError(runId, `not renewed in time: it would run out within ${leaseMarginMs(leaseMs)} ms, so the calls in flight were abandoned`));
    },
  });
  const keeper = setInterval(
    () => {
      // mutant: keeper-renews-during-step
      if (holdsRunRow()) return;
      const sentAt = performance.now();
      // The fault point worker.before-renew: tests stall or fail the renewals (a stalled
      // connection, a Postgres going away) while a call is in flight.
      deps.faults
        .hit('worker.before-renew')
        // mutant: renewal-off
        .then(() => queries.renewLease(pool, runId, token, leaseMs))
        .then(
          (held) => {
            if (held) clock.renewed(sentAt);
            else if (!abort.signal.aborted) {
              log.warn('lease lost while the handler was running; aborting');
              abort.abort(new LeaseLostError(runId));
            }
          },
          (error: unknown) => log.warn({ err: error }, 'lease renewal failed; will retry'),
        );
    },
    Math.max(100, Math.floor(leaseMs / 3)),
  );
  return {
    signal: abort.signal,
    renewed: clock.renewed,
    stop() {
      clearInterval(keeper);
      clock.stop();
    },
  };
}
