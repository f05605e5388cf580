/**
 * Group commit for dispatches (the worker's side of what claim-batcher.ts does at the edge):
 * a dispatch that finds none in flight goes at once, alone, through the one-event statement
 * (queries.dispatchAndLease); dispatches that arrive while one is in flight wait for it and
 * then go together, in ONE statement and one commit (queries.dispatchAndLeaseMany). Under light
 * load nothing waits; under load the batches grow by themselves, and a worker's dispatches cost
 * one round trip and one commit per batch instead of per event.
 *
 * Every dispatch gets exactly the answer the one-event statement would have given it:
 * - its event and runs, created and leased with ITS tokens, once the statement committed;
 * - null when the event was not `received` (dispatched already, finished, gone);
 * - an event dispatched twice at once by this worker (a repeated job) is never in one batch
 *   twice: the second waits for the next batch and finds the event dispatched, as it would have
 *   one statement later;
 * - a batch that fails for any reason but an unavailable database is retried one event at a
 *   time, so one event's error (whatever it is) fails its own job only; an unavailable
 *   database fails every dispatch of the batch (each job is retried by the queue) and, the
 *   statement being one transaction, nothing of the batch was committed, or all of it was.
 */
import { isDatabaseUnavailableError, type Pool } from '@oncehook/shared';
import type { DispatchRequest, Dispatched, Queries } from './store/queries.js';

export interface DispatchBatcherOptions {
  pool: Pool;
  queries: Pick<Queries, 'dispatchAndLease' | 'dispatchAndLeaseMany'>;
  leaseMs: number;
  /**
   * Most events in one statement (default 64): bounds the statement's size and its locks. A
   * worker's concurrency usually bounds a batch first (one dispatch per job in progress).
   */
  maxBatch?: number;
  /** Called with each batch's size (tests, benches). */
  onBatch?: (size: number) => void;
}

export interface DispatchBatcher {
  /** The event's dispatch (dispatchAndLease's answer), resolved after its statement committed. */
  dispatch(request: DispatchRequest): Promise<Dispatched | null>;
}

interface Waiting {
  request: DispatchRequest;
  resolve: (dispatched: Dispatched | null) => void;
  reject: (error: unknown) => void;
}

export function createDispatchBatcher(options: DispatchBatcherOptions): DispatchBatcher {
  const { pool, queries, leaseMs } = options;
  const maxBatch = options.maxBatch ?? 64;
  let waiting: Waiting[] = [];
  let inFlight = false;

  const one = (request: DispatchRequest) => queries.dispatchAndLease(pool, request.rowId, request.runs, leaseMs, request.traceParent);

  /** The next batch: up to maxBatch waiting dispatches of distinct events, oldest first. */
  function takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const events = new Set<number>();
    for (const w of waiting) {
      // mutant: dispatch-batch-repeats-event, dispatch-batch-unbounded
      if (batch.length < maxBatch && !events.has(w.request.rowId)) {
        events.add(w.request.rowId);
        batch.push(w);
      } else rest.push(w);
    }
    waiting = rest;
    return batch;
  }

  function start(): void {
    if (inFlight || waiting.length === 0) return;
    inFlight = true;
    void run(takeBatch()).finally(() => {
      inFlight = false;
      start();
    });
  }

  async function alone(w: Waiting): Promise<void> {
    try {
      w.resolve(await one(w.request));
    } catch (error) {
      w.reject(error);
    }
  }

  async function run(batch: Waiting[]): Promise<void> {
    options.onBatch?.(batch.length);
    if (batch.length === 1) return alone(batch[0]!);
    let results: Map<number, Dispatched>;
    try {
      results = await queries.dispatchAndLeaseMany(
        pool,
        batch.map((w) => w.request),
        leaseMs,
      );
    } catch (error) {
      // mutant: dispatch-batch-fails-together
      if (isDatabaseUnavailableError(error)) {
        for (const w of batch) w.reject(error);
        return;
      }
      // One event's error must not fail the others' jobs: each alone, as without the batch.
      await Promise.all(batch.map(alone));
      return;
    }
    // mutant: dispatch-batch-answers-first
    for (const w of batch) w.resolve(results.get(w.request.rowId) ?? null);
  }

  return {
    dispatch(request) {
      return new Promise<Dispatched | null>((resolve, reject) => {
        waiting.push({ request, resolve, reject });
        start();
      });
    },
  };
}
