/**
 * Group commit for dispatches (group-commit.ts): a dispatch that finds none in flight goes at
 * once, alone, through the one-event statement (queries.dispatchAndLease); dispatches that
 * arrive while one is in flight wait for it and then go together, in ONE statement and one
 * commit (queries.dispatchAndLeaseMany).
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
import type { Pool } from '@oncehook/shared';
import { createGroupCommit } from './group-commit.js';
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

export function createDispatchBatcher(options: DispatchBatcherOptions): DispatchBatcher {
  const { pool, queries, leaseMs } = options;
  const dispatch = createGroupCommit<DispatchRequest, Dispatched | null>({
    keyOf: (request) => request.rowId,
    one: (request) => queries.dispatchAndLease(pool, request.rowId, request.runs, leaseMs, request.traceParent),
    many: (requests) => queries.dispatchAndLeaseMany(pool, requests, leaseMs),
    missing: null,
    maxBatch: options.maxBatch ?? 64,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return { dispatch };
}
