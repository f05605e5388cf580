/**
 * The lease clock: one attempt's view of how long its lease still runs, and the alarm that
 * abandons the attempt's calls BEFORE the lease can run out.
 *
 * Why: a run's lease is what keeps every other worker off it, and a concurrency slot IS a run in
 * progress under a live lease (flow-control.ts). When renewals fail (Postgres restarting or
 * failing over, a stalled connection, an overloaded worker), the lease runs out while the
 * handler's call may still be in flight; another worker then takes the run over, or another run
 * takes the slot, and the downstream sees two calls at once: more than the limit. So the
 * attempt aborts its signal (every step's `signal`: fetch, the outbound client, the forwarder
 * abandon their requests) once the lease's end minus a margin is reached without a renewal.
 * The next holder can lease only after the server's lease_until, which is later.
 *
 * How it measures without comparing clocks: each lease or renewal statement computes
 * lease_until = (the server's now when it ran) + LEASE_MS. The statement ran after it was sent,
 * so `performance.now()` taken before sending, plus LEASE_MS, is never later than lease_until
 * (up to the drift of two clocks' RATES over one lease, not their skew). A renewal only moves
 * the end forward.
 *
 * What remains (docs/flow-control.md, docs/reliability.md): a server that goes on with a request
 * its client abandoned; a process frozen (SIGSTOP, a VM paused, an event loop blocked past the
 * margin) cannot abort anything until it runs again.
 */

export interface LeaseClock {
  /** A lease statement sent at `sentAt` (performance.now()) succeeded: the lease runs to at least sentAt + LEASE_MS. */
  renewed(sentAt: number): void;
  /** How long the lease surely runs from now, in ms (negative: it may have run out). */
  remainingMs(): number;
  /** Stops the alarm (the attempt ended). */
  stop(): void;
}

/**
 * The margin kept before the lease's end: time for the abort to reach the call and the socket to
 * close, and for the timer itself to fire late on a loaded event loop. A tenth of the lease,
 * between 200 ms and 2 s.
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.min(2_000, Math.max(200, Math.floor(leaseMs / 10)));
}

/**
 * Starts the clock of one attempt whose lease was taken by a statement sent at `leasedAt`.
 * `onExpiring` is called once, at the lease's end minus the margin, unless a renewal moved the
 * end first; `holdsRunRow()` true defers it (a local step's transaction holds the run row: no
 * one can take the run over until it ends, and it renews the lease itself before COMMIT).
 */
export function startLeaseClock(options: { leasedAt: number; leaseMs: number; holdsRunRow: () => boolean; onExpiring: () => void }): LeaseClock {
  const { leaseMs } = options;
  const margin = leaseMarginMs(leaseMs);
  let endsAt = options.leasedAt + leaseMs;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  function arm(): void {
    clearTimeout(timer);
    if (stopped) return;
    const due = endsAt - margin - performance.now();
    timer = setTimeout(check, Math.max(0, due));
    timer.unref();
  }

  function check(): void {
    if (stopped) return;
    if (performance.now() < endsAt - margin) {
      arm();
      return;
    }
    if (options.holdsRunRow()) {
      // Look again shortly: the step's commit renews the lease (and moves endsAt) or fails.
      timer = setTimeout(check, Math.max(10, Math.floor(margin / 4)));
      timer.unref();
      return;
    }
    stopped = true;
    // mutant: lease-clock-off
    options.onExpiring();
  }

  arm();
  return {
    renewed(sentAt) {
      if (sentAt + leaseMs > endsAt) {
        endsAt = sentAt + leaseMs;
        arm();
      }
    },
    remainingMs: () => endsAt - performance.now(),
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
