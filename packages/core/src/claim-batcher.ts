/**
 * Group commit for claims: deliveries that arrive while earlier batches are in flight are
 * claimed together, in ONE statement (queries.claimEvents), and their new events handed to
 * the enqueue relay (enqueue-relay.ts), which adds them to the queue after the answers. Under light load a batch is a single
 * delivery and adds no wait; under load batches grow by themselves, because a new batch only
 * starts when fewer than `maxConcurrentBatches` are in flight.
 *
 * Every delivery still gets its own exact answer, and only after the statement that claimed
 * it has committed:
 * - a key repeated inside one batch is claimed once; the repeats answer `duplicate` once that
 *   claim has committed;
 * - a batch that fails for any reason but an unavailable database (one poison payload: a
 *   \u0000 jsonb refuses, a time out of range) is retried one delivery at a time, so only the
 *   bad one fails (400 for a data exception) and the others are claimed;
 * - an unavailable database fails every delivery of the batch: each answers 503 and nothing
 *   was stored.
 *
 * Backpressure, so that an unreachable database cannot grow memory or answer times without
 * bound:
 * - at most `maxWaiting` deliveries wait for a batch (past it: OverloadedError at once); their
 *   bytes are bounded at the edge (MAX_INFLIGHT_BODY_BYTES, reserved until the answer);
 * - a batch's deliveries are answered within `claimTimeoutMs`: past it they fail
 *   (OverloadedError, 503) and the statement is cut client-side (pg's query_timeout, which
 *   destroys the connection). A statement that commits after all the same still has its new
 *   events enqueued; the provider's retry is then a duplicate: nothing acknowledged is lost,
 *   nothing is lost that was not acknowledged either;
 * - after `breakerFailures` batches in a row find the database unavailable (or silent), the
 *   circuit opens for `breakerOpenMs`: every waiting and new claim fails at once (503) instead
 *   of waiting out a timeout. Then one batch goes through (half-open): success closes it.
 */
import {
  eventKey,
  isClaimConflictError,
  isDatabaseUnavailableError,
  OverloadedError,
  type EventJobData,
  type Faults,
  type Logger,
  type Pool,
  type VerifiedEvent,
} from '@oncehook/shared';
import type { ClaimResult, Queries } from './store/queries.js';
import type { EnqueueRelay } from './enqueue-relay.js';

/**
 * Runs of one claim statement that lost a race before it fails: with every batch taking its
 * locks in one order (queries.claimEvents), a conflict is rare, and two in a row rarer still.
 */
const CLAIM_CONFLICT_ATTEMPTS = 3;

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
  readonly circuit: 'closed' | 'open' | 'half-open';
}

interface Waiting {
  event: VerifiedEvent;
  resolve(result: ClaimResult): void;
  reject(error: unknown): void;
}

export function createClaimBatcher(options: ClaimBatcherOptions): ClaimBatcher {
  const maxBatch = options.maxBatch ?? 200;
  const maxConcurrent = options.maxConcurrentBatches ?? 4;
  const maxWaiting = options.maxWaiting ?? 2_000;
  const breakerFailures = options.breakerFailures ?? 2;
  const breakerOpenMs = options.breakerOpenMs ?? 2_000;
  const claimTimeoutMs = options.claimTimeoutMs ?? 750;
  const now = options.now ?? Date.now;
  let waiting: Waiting[] = [];
  let inFlight = 0;
  let scheduled = false;
  let failures = 0;
  let openUntil = 0;
  let probing = false;

  const circuit = (): ClaimBatcher['circuit'] => (openUntil === 0 ? 'closed' : now() < openUntil ? 'open' : 'half-open');
  const overloaded = (why: string) => new OverloadedError(`ingest cannot record deliveries right now: ${why}; nothing was stored, retry later`);

  /** Batches whose statement is running: answered at once when the circuit opens. */
  const running = new Set<Waiting[]>();

  function failAllWaiting(error: unknown): void {
    const dropped = waiting;
    waiting = [];
    for (const w of dropped) w.reject(error);
    // A promise settles once: a running batch that completes later answers no one again (its
    // new events are still enqueued).
    for (const batch of running) for (const w of batch) w.reject(error);
  }

  function recordOutcome(unavailable: boolean): void {
    if (!unavailable) {
      failures = 0;
      openUntil = 0;
      return;
    }
    failures += 1;
    if (failures >= breakerFailures || circuit() === 'half-open') {
      if (circuit() !== 'open') options.log.warn({ failures, openMs: breakerOpenMs }, 'database unavailable: circuit open, answering 503 at once');
      openUntil = now() + breakerOpenMs;
      failAllWaiting(overloaded('the database is unavailable'));
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      while (waiting.length > 0 && inFlight < maxConcurrent) {
        const state = circuit();
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

  type Claimed = (ClaimResult | { error: unknown })[];

  async function claimAll(events: VerifiedEvent[], copies: number[]): Promise<{ results: Claimed; unavailable: boolean }> {
    const limit = { timeoutMs: claimTimeoutMs, logDeliveries: options.logDeliveries !== false };
    try {
      return { results: await claimConflictsRetried(() => options.queries.claimEvents(options.pool, events, { ...limit, copies })), unavailable: false };
    } catch (error) {
      const unavailable = isDatabaseUnavailableError(error);
      if (unavailable || events.length === 1) return { results: events.map(() => ({ error })), unavailable };
      // Something in the batch poisoned the statement: claim one by one, so only it fails.
      options.log.warn({ err: error, events: events.length }, 'a batch of claims failed; claiming its deliveries one by one');
      const results = await Promise.all(
        events.map((event) => claimConflictsRetried(() => options.queries.claimEvent(options.pool, event, limit)).catch((e: unknown) => ({ error: e }))),
      );
      return { results, unavailable: false };
    }
  }

  /**
   * A claim statement that lost a race (a deadlock, a serialization failure, a delivery-log row
   * whose event retention just deleted: isClaimConflictError) rolled back whole: it stored
   * nothing, so running it again is safe, and answers what the database holds now. Never
   * answered as a failure while another transaction committed the rows. Bounded: a statement
   * that keeps losing fails like any other (one by one, then 500 for the one that fails).
   */
  async function claimConflictsRetried<T>(claim: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await claim();
      } catch (error) {
        if (!isClaimConflictError(error) || attempt >= CLAIM_CONFLICT_ATTEMPTS) throw error;
        options.log.info({ err: error, attempt }, 'a claim statement lost a race with another transaction; running it again');
      }
    }
  }

  /** Resolves with the claim, or with 'timeout' after claimTimeoutMs, whichever comes first. */
  async function deadline<T>(work: Promise<T>): Promise<T | 'timeout'> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), claimTimeoutMs);
    });
    try {
      return await Promise.race([work, expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Hands the events a claim created to the relay (which leaves a failure to the reconciler). */
  function relayCreated(unique: VerifiedEvent[], results: Claimed): void {
    const fresh: EventJobData[] = [];
    results.forEach((result, i) => {
      // A dispatch job: the worker creates the event's handler runs.
      if ('outcome' in result && result.outcome === 'new') {
        const event = unique[i]!;
        fresh.push({
          rowId: result.rowId,
          provider: event.provider,
          eventId: event.eventId,
          kind: event.kind,
          type: event.type,
          attempt: 0,
          ...(event.traceparent ? { trace: event.traceparent } : {}),
        });
      }
    });
    options.relay.push(fresh);
  }

  async function run(batch: Waiting[]): Promise<void> {
    // Fold repeats of a key inside the batch onto its first occurrence.
    const firstIndex = new Map<string, number>();
    const unique: VerifiedEvent[] = [];
    const copies: number[] = [];
    const slot = batch.map((w) => {
      const key = eventKey(w.event.provider, w.event.eventId);
      let index = firstIndex.get(key);
      if (index === undefined) {
        index = unique.length;
        firstIndex.set(key, index);
        unique.push(w.event);
        copies.push(1);
        return { index, repeat: false };
      }
      copies[index] = (copies[index] ?? 1) + 1;
      return { index, repeat: true };
    });

    options.onBatch?.(batch.length);
    running.add(batch);
    try {
      await claimAndAnswer(batch, unique, copies, slot);
    } finally {
      running.delete(batch);
    }
  }

  async function claimAndAnswer(batch: Waiting[], unique: VerifiedEvent[], copies: number[], slot: { index: number; repeat: boolean }[]): Promise<void> {
    const claiming = claimAll(unique, copies);
    const claimed = await deadline(claiming);
    if (claimed === 'timeout') {
      // The database did not answer in time: answer 503 now (the provider retries). The
      // statement is cut by its query_timeout; if it commits anyway, its new events are still
      // enqueued and the retry is a duplicate.
      recordOutcome(true);
      const error = new OverloadedError(
        `ingest cannot record deliveries right now: the database did not answer within ${claimTimeoutMs} ms; retry later (if this delivery was recorded after all, the retry is answered as a duplicate)`,
      );
      for (const waiter of batch) waiter.reject(error);
      const late = await claiming;
      relayCreated(unique, late.results);
      return;
    }
    recordOutcome(claimed.unavailable);
    const { results } = claimed;

    // Committed: the rows are durable, the answers can go. The new events' jobs go to the
    // relay, which adds them after the answers, in bulk (Redis is not on the answer's path).
    await options.faults.hit('ingest.after-claim');
    relayCreated(unique, results);

    batch.forEach((waiter, i) => {
      const { index, repeat } = slot[i]!;
      const result = results[index]!;
      if ('error' in result) waiter.reject(result.error);
      else if (repeat) waiter.resolve({ outcome: 'duplicate-concurrent' });
      else waiter.resolve(result);
    });

    // Duplicates of a row committed after the statement's snapshot were not in its delivery
    // log; record them now (after the answers: the log is for operators, never on the path).
    const concurrent = unique.flatMap((event, i) => {
      const result = results[i];
      return result && 'outcome' in result && result.outcome === 'duplicate-concurrent' ? [{ event, copies: copies[i] ?? 1 }] : [];
    });
    if (concurrent.length > 0 && options.logDeliveries !== false) {
      options.queries
        .logDeliveries(
          options.pool,
          concurrent.map((c) => ({ provider: c.event.provider, eventId: c.event.eventId, bodyHash: c.event.bodyHash ?? null, copies: c.copies })),
        )
        .catch((error: unknown) => {
          options.log.debug({ err: error }, 'could not log concurrent duplicate deliveries');
        });
    }
  }

  return {
    claim(event) {
      if (circuit() === 'open') return Promise.reject(overloaded('the database is unavailable (circuit open)'));
      if (waiting.length >= maxWaiting) return Promise.reject(overloaded(`${waiting.length} deliveries are already waiting for the database`));
      return new Promise<ClaimResult>((resolve, reject) => {
        waiting.push({ event, resolve, reject });
        schedule();
      });
    },
    get circuit() {
      return circuit();
    },
  };
}
