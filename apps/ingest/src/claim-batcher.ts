/**
 * Group commit for claims: deliveries that arrive while earlier batches are in flight are
 * claimed together, in ONE statement (queries.claimEvents), and their new events enqueued
 * together, in ONE Redis round trip (queue.addBulk). Under light load a batch is a single
 * delivery and adds no wait; under load batches grow by themselves, because a new batch only
 * starts when fewer than `maxConcurrentBatches` are in flight.
 *
 * Every delivery still gets its own exact answer, and only after the statement that claimed
 * it has committed:
 * - a key repeated inside one batch is claimed once; the repeats answer `duplicate` once that
 *   claim has committed;
 * - a batch that fails because one payload cannot be stored (jsonb refuses a \u0000) is
 *   retried one delivery at a time, so only the bad one gets its 400;
 * - any other failure (Postgres unavailable) fails every delivery of the batch: each answers
 *   503 and nothing was stored.
 */
import {
  enqueueNewEvents,
  eventKey,
  isUnstorablePayloadError,
  withTimeout,
  type ClaimResult,
  type EventJobData,
  type Faults,
  type Logger,
  type Pool,
  type Queries,
  type VerifiedEvent,
} from '@oncehook/shared';
import type { Queue } from 'bullmq';

export interface ClaimBatcherOptions {
  pool: Pool;
  queries: Queries;
  queue: Queue<EventJobData>;
  log: Logger;
  faults: Faults;
  enqueueTimeoutMs: number;
  /** Most deliveries in one statement. */
  maxBatch?: number;
  /** Batches in flight at once (each holds one pool connection). */
  maxConcurrentBatches?: number;
  /** Called with each batch's size (metrics, tests). */
  onBatch?: (size: number) => void;
}

export interface ClaimBatcher {
  /** Claims the event (and enqueues it if new); resolves after the claim committed. */
  claim(event: VerifiedEvent): Promise<ClaimResult>;
}

interface Waiting {
  event: VerifiedEvent;
  resolve(result: ClaimResult): void;
  reject(error: unknown): void;
}

export function createClaimBatcher(options: ClaimBatcherOptions): ClaimBatcher {
  const maxBatch = options.maxBatch ?? 200;
  const maxConcurrent = options.maxConcurrentBatches ?? 4;
  let waiting: Waiting[] = [];
  let inFlight = 0;
  let scheduled = false;

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      while (waiting.length > 0 && inFlight < maxConcurrent) {
        const batch = waiting.slice(0, maxBatch);
        waiting = waiting.slice(batch.length);
        inFlight += 1;
        void run(batch).finally(() => {
          inFlight -= 1;
          if (waiting.length > 0) schedule();
        });
      }
    });
  }

  async function claimAll(events: VerifiedEvent[]): Promise<(ClaimResult | { error: unknown })[]> {
    try {
      return await options.queries.claimEvents(options.pool, events);
    } catch (error) {
      if (!isUnstorablePayloadError(error) || events.length === 1) return events.map(() => ({ error }));
      // One bad payload poisoned the statement: claim one by one so only it fails.
      return Promise.all(events.map((event) => options.queries.claimEvent(options.pool, event).catch((e: unknown) => ({ error: e }))));
    }
  }

  async function run(batch: Waiting[]): Promise<void> {
    // Fold repeats of a key inside the batch onto its first occurrence.
    const firstIndex = new Map<string, number>();
    const unique: VerifiedEvent[] = [];
    const slot = batch.map((w) => {
      const key = eventKey(w.event.provider, w.event.eventId);
      let index = firstIndex.get(key);
      if (index === undefined) {
        index = unique.length;
        firstIndex.set(key, index);
        unique.push(w.event);
        return { index, repeat: false };
      }
      return { index, repeat: true };
    });

    options.onBatch?.(batch.length);
    const results = await claimAll(unique);

    // Committed. Enqueue the new events in one round trip before answering; a failure or a
    // timeout is logged and left to the reconciler (the rows are durable).
    const fresh: EventJobData[] = [];
    results.forEach((result, i) => {
      // A dispatch job: the worker creates the event's handler runs.
      if ('outcome' in result && result.outcome === 'new') fresh.push({ rowId: result.rowId, provider: unique[i]!.provider, eventId: unique[i]!.eventId, attempt: 0 });
    });
    if (fresh.length > 0) {
      try {
        await options.faults.hit('ingest.after-claim');
        await withTimeout(enqueueNewEvents(options.queue, fresh), options.enqueueTimeoutMs, 'enqueue');
      } catch (error) {
        options.log.warn({ err: error, events: fresh.length }, 'enqueue failed after commit; the reconciler will enqueue these events');
      }
    }

    batch.forEach((waiter, i) => {
      const { index, repeat } = slot[i]!;
      const result = results[index]!;
      if ('error' in result) waiter.reject(result.error);
      else if (repeat) waiter.resolve({ outcome: 'duplicate-concurrent' });
      else waiter.resolve(result);
    });
  }

  return {
    claim(event) {
      return new Promise<ClaimResult>((resolve, reject) => {
        waiting.push({ event, resolve, reject });
        schedule();
      });
    },
  };
}
