/**
 * The relay from the outbox to the queue: Redis is not on the answer's path.
 *
 * The events table is the outbox. A claim commits the event in state `received`; from that
 * moment it is durable and the delivery is answered. Putting its dispatch job on the queue is
 * the relay's job, done right after, off the answer's path:
 *
 * - new events from every committed batch are pushed here and added in bulk (one Redis round
 *   trip per `maxBulk` events; while one add is in flight the next batch accumulates, so the
 *   busier ingest is, the bigger and cheaper each add);
 * - an add that fails or times out is logged and dropped, and so are events beyond `maxPending`
 *   (Redis down for long): their rows stay `received`, and the workers' reconciler enqueues
 *   every `received` row older than REQUEUE_AFTER_MS. That reconciler is the guaranteed relay;
 *   this one is the fast path. The job id derives from the event key, so a job added by both
 *   is still one job;
 * - a crash between the answer and the add loses nothing either (the same reconciler pass);
 * - a duplicate that finds its event still `received` long after its claim nudges it
 *   (`nudge`): the job is added again, replacing a finished job of the same id, after the
 *   duplicate's answer like every other add (at most `maxPending` nudges wait; the reconciler
 *   covers the rest).
 *
 * On QUEUE_BACKEND=postgres the queue is a table of the events' database, and there is nothing
 * to relay for new events: the claim statement inserts their jobs itself (`inClaim`, insert on
 * claim), in the transaction that records the events. The relay then only carries what falls
 * outside a batch's statement: nudges, and the claims of a batch that fell back to one
 * statement per delivery.
 *
 * Exactly one add in flight per ingest process; several ingest processes relay their own
 * claims (never each other's), so no coordination is needed. `flush()` on shutdown adds what
 * is pending before the queue closes.
 */
import { claimJobsFor, enqueueEvent, enqueueNewEvents, type JobTarget } from './queue.js';
import type { ClaimJobs } from './postgres-queue.js';
import { withTimeout, type Faults, type Logger } from '@oncehook/shared';
import type { EventJobData } from './vocabulary.js';

export interface EnqueueRelayOptions {
  queue: JobTarget;
  log: Logger;
  faults: Faults;
  /** Longest one bulk add may take before it is given up (the reconciler covers it). */
  enqueueTimeoutMs: number;
  /** Most jobs in one add. */
  maxBulk?: number;
  /** Most jobs waiting for an add; past it new ones are left to the reconciler. */
  maxPending?: number;
  /** Called after each add with its size and whether it succeeded (metrics, tests). */
  onAdd?: (size: number, ok: boolean) => void;
}

export interface EnqueueRelay {
  /**
   * The new events' jobs for a claim statement to insert itself (QUEUE_BACKEND=postgres: insert
   * on claim); undefined when they go through `push` after the commit (Redis, where `jobs` is
   * not called). Never throws.
   */
  inClaim(jobs: () => Omit<EventJobData, 'rowId'>[]): Promise<ClaimJobs | undefined>;
  /** Hands over the dispatch jobs of newly committed events; never throws, never waits. */
  push(jobs: EventJobData[]): void;
  /**
   * Adds an event's dispatch job again, replacing a finished job of the same id: an event still
   * `received` long after its claim (its first add may have been lost). Never throws, never waits.
   */
  nudge(job: EventJobData): void;
  /** Resolves when everything pushed so far has been added (or given up), within `timeoutMs`. */
  flush(timeoutMs: number): Promise<void>;
  /** Jobs waiting for an add. */
  readonly pending: number;
}

export function createEnqueueRelay(options: EnqueueRelayOptions): EnqueueRelay {
  const maxBulk = options.maxBulk ?? 500;
  const maxPending = options.maxPending ?? 20_000;
  let pending: EventJobData[] = [];
  /** Nudges waiting, by row: one per event however many duplicates ask. */
  const nudges = new Map<number, EventJobData>();
  let running: Promise<void> | null = null;
  let overflowing = false;

  /** Adds what waits, nudges first (a few, and waiting longest), then new events in bulk. */
  async function drain(): Promise<void> {
    while (nudges.size > 0 || pending.length > 0) {
      if (nudges.size > 0) await addNudge();
      else await addBulk();
    }
  }

  async function addNudge(): Promise<void> {
    const [rowId, job] = nudges.entries().next().value as [number, EventJobData];
    nudges.delete(rowId);
    try {
      await withTimeout(enqueueEvent(options.queue, job, { replaceFinished: true }), options.enqueueTimeoutMs, 'enqueue');
    } catch (error) {
      options.log.warn({ err: error, rowId }, 'nudge not added; the reconciler will enqueue the event');
    }
  }

  async function addBulk(): Promise<void> {
    const jobs = pending.slice(0, maxBulk);
    pending = pending.slice(jobs.length);
    try {
      await options.faults.hit('ingest.before-enqueue');
      // mutant: relay-never-adds
      await withTimeout(enqueueNewEvents(options.queue, jobs), options.enqueueTimeoutMs, 'enqueue');
      options.onAdd?.(jobs.length, true);
    } catch (error) {
      options.onAdd?.(jobs.length, false);
      options.log.warn({ err: error, events: jobs.length }, 'enqueue failed after commit; the reconciler will enqueue these events');
    }
  }

  function start(): void {
    if (running) return;
    // After the current I/O phase: the answers of the batch that pushed these are written first.
    running = new Promise<void>((resolve) => setImmediate(resolve)).then(drain).finally(() => {
      running = null;
      if (pending.length > 0 || nudges.size > 0) start();
    });
  }

  return {
    inClaim(jobs) {
      return claimJobsFor(options.queue, jobs);
    },
    push(jobs) {
      if (jobs.length === 0) return;
      // mutant: relay-unbounded
      const room = Math.max(0, maxPending - pending.length);
      if (room < jobs.length && !overflowing) {
        // Once per overflow streak, not once per batch.
        options.log.warn({ pending: pending.length, maxPending }, 'enqueue backlog full (Redis slow or down); new events are left to the reconciler');
      }
      overflowing = room < jobs.length;
      pending.push(...jobs.slice(0, room));
      start();
    },
    nudge(job) {
      if (nudges.size >= maxPending && !nudges.has(job.rowId)) return;
      nudges.set(job.rowId, job);
      start();
    },
    async flush(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while ((running || pending.length > 0 || nudges.size > 0) && Date.now() < deadline) {
        await Promise.race([running ?? Promise.resolve(), new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())))]);
        if (!running && (pending.length > 0 || nudges.size > 0)) start();
      }
    },
    get pending() {
      return pending.length;
    },
  };
}
