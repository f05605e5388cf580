/**
 * Fault points: named places in the code where a test can make a real process crash, stall or
 * throw, to prove what happens when it does at exactly that moment.
 *
 * Enabled only through ONCEHOOK_FAULTS (empty in production), e.g.
 *   ONCEHOOK_FAULTS="ingest.after-claim:crash"          kill -9 ourselves after the claim commits
 *   ONCEHOOK_FAULTS="worker.in-handler:delay=10000"     stall 10 s inside the handler
 *   ONCEHOOK_FAULTS="worker.before-done:error"          throw right before the final commit
 *   ONCEHOOK_FAULTS="ingest.after-claim:spin=4000"      block the event loop for 4 s (a wedged process)
 * Each hit prints `oncehook-fault <point>` on stdout first, so a test can wait for the moment.
 *
 * Points in the code: ingest.after-claim (committed, not yet answered), ingest.before-enqueue
 * (answered, the relay about to add the job), worker.in-handler, worker.step-before-commit,
 * worker.after-external-call, worker.before-done, worker.gate-after-count (the slots of a
 * handler with a concurrency and a rate limit counted, its lease not yet taken: store/flow.ts),
 * worker.before-hand-over (a limited handler's run ended, its slot not yet handed over:
 * process-event.ts),
 * worker.before-renew (each background
 * renewal of a running handler's lease: delay it to stall renewals, as a stalled connection
 * would).
 */
export type FaultAction = { kind: 'crash' } | { kind: 'delay'; ms: number } | { kind: 'spin'; ms: number } | { kind: 'error' };

export interface Faults {
  /**
   * Awaits the configured action for this point (no-op when the point is not configured).
   * `detail` says where exactly (the step name), for fault injectors that care (the test kit).
   */
  hit(point: string, detail?: { step?: string }): Promise<void>;
}

export function parseFaults(spec: string): Map<string, FaultAction> {
  const faults = new Map<string, FaultAction>();
  for (const entry of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [point, action = ''] = entry.split(':');
    if (!point) throw new Error(`ONCEHOOK_FAULTS: entry "${entry}" has no point name`);
    if (action === 'crash') faults.set(point, { kind: 'crash' });
    else if (action === 'error') faults.set(point, { kind: 'error' });
    else if (action.startsWith('delay=')) faults.set(point, { kind: 'delay', ms: Number.parseInt(action.slice(6), 10) || 0 });
    else if (action.startsWith('spin=')) faults.set(point, { kind: 'spin', ms: Number.parseInt(action.slice(5), 10) || 0 });
    else throw new Error(`ONCEHOOK_FAULTS: unknown action "${action}" for ${point} (use crash, error, delay=MS or spin=MS)`);
  }
  return faults;
}

export function createFaults(spec: string): Faults {
  const faults = parseFaults(spec);
  if (faults.size === 0) return { hit: async () => {} };
  return {
    async hit(point) {
      const action = faults.get(point);
      if (!action) return;
      process.stdout.write(`oncehook-fault ${point}\n`);
      if (action.kind === 'crash') {
        process.kill(process.pid, 'SIGKILL');
        await new Promise(() => {}); // never resumes: the signal is delivered before this matters
      } else if (action.kind === 'delay') {
        await new Promise((resolve) => setTimeout(resolve, action.ms));
      } else if (action.kind === 'spin') {
        // Holds the event loop: nothing else in this thread runs meanwhile.
        const until = Date.now() + action.ms;
        while (Date.now() < until) {
          /* spin */
        }
      } else {
        throw new Error(`fault injected at ${point}`);
      }
    },
  };
}

export const noFaults: Faults = { hit: async () => {} };
