/**
 * Group commit for a worker's statements that hold no user code (the worker's side of what
 * claim-batcher.ts does at the edge): a request that finds none in flight goes at once, alone,
 * through its one-request statement; requests that arrive while one is in flight wait for it and
 * then go together, in ONE statement and one commit. Under light load nothing waits; under load
 * the batches grow by themselves, and the work costs one round trip and one commit per batch
 * instead of per request. Used by the dispatch (dispatch-batcher.ts) and by the run's done,
 * lease proofs and external records (run-batchers.ts).
 *
 * Every request gets exactly the answer its one-request statement would have given it:
 * - its own result, once the batch's statement committed (`missing` when the statement returned
 *   none for its key: what the one-request statement answers with 0 rows);
 * - two requests with one key are never in one batch: the second waits for the next batch, and
 *   finds what the first did, as it would have one statement later;
 * - a batch that fails for any reason but an unavailable database is retried one request at a
 *   time, so one request's error (whatever it is) fails its own caller only; an unavailable
 *   database fails every request of the batch (each caller retries) and, the statement being
 *   one transaction, nothing of the batch was committed, or all of it was.
 */
import { isDatabaseUnavailableError } from '@oncehook/shared';

export interface GroupCommitOptions<Request, Result> {
  /** What two requests that must not share a batch have in common (an event's row, a run's id). */
  keyOf: (request: Request) => number;
  /** The one-request statement. */
  one: (request: Request) => Promise<Result>;
  /** The batch's statement: each request's result by its key. */
  many: (requests: Request[]) => Promise<Map<number, Result>>;
  /** A request's result when `many` returned none for its key. */
  missing: Result;
  /** Most requests in one statement: bounds the statement's size and its locks. */
  maxBatch: number;
  /** Called with each batch's size (tests, benches, metrics). */
  onBatch?: (size: number) => void;
}

interface Waiting<Request, Result> {
  request: Request;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
}

/** A function that runs one request through the group commit; resolves after its commit. */
export function createGroupCommit<Request, Result>(options: GroupCommitOptions<Request, Result>): (request: Request) => Promise<Result> {
  const { keyOf, maxBatch } = options;
  let waiting: Waiting<Request, Result>[] = [];
  let inFlight = false;

  /** The next batch: up to maxBatch waiting requests of distinct keys, oldest first. */
  function takeBatch(): Waiting<Request, Result>[] {
    const batch: Waiting<Request, Result>[] = [];
    const rest: Waiting<Request, Result>[] = [];
    const keys = new Set<number>();
    for (const w of waiting) {
      // mutant: dispatch-batch-repeats-event, dispatch-batch-unbounded
      if (batch.length < maxBatch && !keys.has(keyOf(w.request))) {
        keys.add(keyOf(w.request));
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

  async function alone(w: Waiting<Request, Result>): Promise<void> {
    try {
      w.resolve(await options.one(w.request));
    } catch (error) {
      w.reject(error);
    }
  }

  async function run(batch: Waiting<Request, Result>[]): Promise<void> {
    options.onBatch?.(batch.length);
    if (batch.length === 1) return alone(batch[0]!);
    let results: Map<number, Result>;
    try {
      results = await options.many(batch.map((w) => w.request));
    } catch (error) {
      // mutant: dispatch-batch-fails-together
      if (isDatabaseUnavailableError(error)) {
        for (const w of batch) w.reject(error);
        return;
      }
      // One request's error must not fail the others: each alone, as without the batch.
      await Promise.all(batch.map(alone));
      return;
    }
    // mutant: dispatch-batch-answers-first
    for (const w of batch) w.resolve(results.has(keyOf(w.request)) ? results.get(keyOf(w.request))! : options.missing);
  }

  return (request) =>
    new Promise<Result>((resolve, reject) => {
      waiting.push({ request, resolve, reject });
      start();
    });
}
