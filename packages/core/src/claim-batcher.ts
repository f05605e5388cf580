/**
 * Group commit for claims: deliveries that arrive while earlier batches are in flight are
 * claimed together in one statement (one batch's steps: claim-batch.ts), each still answered
 * exactly and only after its claim committed. Under light load a batch is one delivery and adds
 * no wait; under load batches grow by themselves (a new one starts only when fewer than
 * `maxConcurrentBatches` are in flight). Backpressure, so that a database that stops answering
 * cannot grow memory or answer times: at most `maxWaiting` deliveries wait, each is answered
 * within `claimTimeoutMs` of its arrival, and a circuit (claim-circuit.ts) answers at once
 * while the database is unavailable (docs/operating.md, "When Postgres stops answering").
 */
import { OverloadedError, type Faults, type Logger, type Pool, type VerifiedEvent } from '@oncehook/shared';
import { claimAndAnswer, type BatchDeps, type Waiting } from './claim-batch.js';
import { createClaimCircuit, type CircuitState } from './claim-circuit.js';
import type { EnqueueRelay } from './enqueue-relay.js';
import type { ClaimResult, Queries } from './store/queries.js';

export interface ClaimBatcherOptions {
  pool: Pool;
  queries: Queries;
  /** Where the dispatch jobs of new events go, off the answer's path (enqueue-relay.ts). */
  relay: EnqueueRelay;
  log: Logger;
  faults: Faults;
  /** Most deliveries in one statement. */
  maxBatch?: number;
  /** Batches in flight at once (each holds one pool connection). */
  maxConcurrentBatches?: number;
  /** Most deliveries waiting for a batch; past it a claim fails at once. */
  maxWaiting?: number;
  /** Consecutive batches that find the database unavailable before the circuit opens. */
  breakerFailures?: number;
  /** How long the circuit stays open. */
  breakerOpenMs?: number;
  /** Longest a delivery waits for its batch's statement before it is answered 503. */
  claimTimeoutMs?: number;
  /** Record every delivery in the delivery log (default true). */
  logDeliveries?: boolean;
  /** Called with each batch's size (metrics, tests). */
  onBatch?: (size: number) => void;
  now?: () => number;
}

export interface ClaimBatcher {
  /** Claims the event (a new one's job goes to the relay); resolves after the claim committed. */
  claim(event: VerifiedEvent): Promise<ClaimResult>;
  /** The circuit: closed (normal), open (failing fast) or half-open (one batch probing). */
  readonly circuit: CircuitState;
}

function batchDeps(options: ClaimBatcherOptions): BatchDeps {
  const { pool, queries, log, relay, faults } = options;
  return { pool, queries, log, relay, faults, claimTimeoutMs: options.claimTimeoutMs ?? 750, logDeliveries: options.logDeliveries !== false, now: options.now ?? Date.now };
}

export function createClaimBatcher(options: ClaimBatcherOptions): ClaimBatcher {
  const maxBatch = options.maxBatch ?? 200;
  const maxConcurrent = options.maxConcurrentBatches ?? 4;
  const maxWaiting = options.maxWaiting ?? 2_000;
  const now = options.now ?? Date.now;
  const breaker = createClaimCircuit({ failures: options.breakerFailures ?? 2, openMs: options.breakerOpenMs ?? 2_000, now, log: options.log });
  const deps = batchDeps(options);
  let waiting: Waiting[] = [];
  let inFlight = 0;
  let scheduled = false;
  let probing = false;
  let sweep: NodeJS.Timeout | undefined;
  /** Batches whose statement is running: answered at once when the circuit opens. */
  const running = new Set<Waiting[]>();

  const overloaded = (why: string) => new OverloadedError(`ingest cannot record deliveries right now: ${why}; nothing was stored, retry later`);

  function failAllWaiting(error: unknown): void {
    const dropped = waiting;
    waiting = [];
    for (const w of dropped) w.reject(error);
    // A promise settles once: a running batch that completes later answers no one again (its
    // new events are still enqueued).
    for (const batch of running) for (const w of batch) w.reject(error);
  }

  /**
   * Answers 503 every waiting delivery whose deadline passed before a batch took it (every
   * slot held by batches that wait on the database), and sets the next sweep for the earliest
   * deadline still waiting: one timer for all of them.
   */
  function expireWaiting(): void {
    sweep = undefined;
    const t = now();
    const late = waiting.filter((w) => w.deadline <= t);
    if (late.length > 0) {
      waiting = waiting.filter((w) => w.deadline > t);
      const error = overloaded(`no database connection was free to record it within ${deps.claimTimeoutMs} ms (CLAIM_TIMEOUT_MS)`);
      for (const w of late) w.reject(error);
    }
    armSweep();
  }

  function armSweep(): void {
    if (sweep !== undefined || waiting.length === 0) return;
    const first = waiting[0]!.deadline;
    sweep = setTimeout(expireWaiting, Math.max(1, first - now()));
    sweep.unref();
  }

  function recordOutcome(unavailable: boolean): void {
    if (breaker.record(unavailable)) failAllWaiting(overloaded('the database is unavailable'));
  }

  /** Starts batches while deliveries wait and fewer than maxConcurrent are in flight. */
  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      while (waiting.length > 0 && inFlight < maxConcurrent) {
        const state = breaker.state();
        if (state === 'open') {
          failAllWaiting(overloaded('the database is unavailable (circuit open)'));
          return;
        }
        if (state === 'half-open') {
          // One batch probes; the rest wait for its verdict.
          if (probing) return;
          probing = true;
        }
        const batch = waiting.slice(0, state === 'half-open' ? 1 : maxBatch);
        waiting = waiting.slice(batch.length);
        inFlight += 1;
        void run(batch).finally(() => {
          inFlight -= 1;
          if (state === 'half-open') probing = false;
          if (waiting.length > 0) schedule();
        });
      }
    });
  }

  async function run(batch: Waiting[]): Promise<void> {
    options.onBatch?.(batch.length);
    running.add(batch);
    try {
      await claimAndAnswer(deps, batch, recordOutcome);
    } finally {
      running.delete(batch);
    }
  }

  return {
    claim(event) {
      if (breaker.state() === 'open') return Promise.reject(overloaded('the database is unavailable (circuit open)'));
      if (waiting.length >= maxWaiting) return Promise.reject(overloaded(`${waiting.length} deliveries are already waiting for the database`));
      return new Promise<ClaimResult>((resolve, reject) => {
        waiting.push({ event, resolve, reject, deadline: now() + deps.claimTimeoutMs });
        schedule();
        // mutant: claim-deadline-from-batch-start
        armSweep();
      });
    },
    get circuit() {
      return breaker.state();
    },
  };
}
