/**
 * One batch of claims, from the deliveries a batch took to their answers (the scheduling of
 * batches and the backpressure are claim-batcher.ts's). claimAndAnswer runs the steps below in
 * order; each carries one part of the guarantee that every delivery gets its own exact answer,
 * and only after the statement that claimed it has committed:
 * - foldRepeats: a key repeated inside one batch is claimed once;
 * - claimBatch: one statement for the batch; a statement that lost a race runs again; a batch
 *   poisoned by one payload is claimed one delivery at a time, so only the bad one fails;
 * - withinDeadline: a database that does not answer in time gets the batch a 503;
 * - answerBatch: each delivery's answer, after the commit; the new events to the relay;
 * - logConcurrentDuplicates: the delivery log of repeats a concurrent claim committed.
 */
import { isClaimConflictError, isDatabaseUnavailableError, OverloadedError, type Faults, type Logger, type Pool, type VerifiedEvent } from '@oncehook/shared';
import { eventKey } from './event-key.js';
import type { EventJobData } from './vocabulary.js';
import type { EnqueueRelay } from './enqueue-relay.js';
import type { ClaimResult, Queries } from './store/queries.js';

/**
 * Runs of one claim statement that lost a race before it fails: with every batch taking its
 * locks in one order (queries.claimEvents), a conflict is rare, and two in a row rarer still.
 */
const CLAIM_CONFLICT_ATTEMPTS = 3;

/**
 * How long after the deliveries' deadline the statement itself is cut (pg's query_timeout,
 * which frees the connection). The answer is the deadline's (withinDeadline); a statement cut
 * due at the same millisecond, its timer set first, would answer "unavailable" instead and
 * count toward the circuit before any delivery saw the deadline (claim-batcher.test.ts).
 */
const STATEMENT_CUT_AFTER_DEADLINE_MS = 250;

/** A delivery waiting for its batch's answer. */
export interface Waiting {
  event: VerifiedEvent;
  /** When its answer is due (its arrival + claimTimeoutMs): the wait for a batch, a connection and the statement all count. */
  deadline: number;
  resolve(result: ClaimResult): void;
  reject(error: unknown): void;
}

/** Each distinct event's claim result (or the error that claim ended in), by position. */
export type Claimed = (ClaimResult | { error: unknown })[];

/** The batch with repeats of a key folded onto its first occurrence. */
export interface FoldedBatch {
  /** The distinct events, in first-seen order: what the statement claims. */
  unique: VerifiedEvent[];
  /** How many deliveries of the batch carried each distinct event (the delivery log counts them). */
  copies: number[];
  /** For each delivery of the batch: its distinct event, and whether it repeats an earlier one. */
  slot: { index: number; repeat: boolean }[];
}

export interface BatchDeps {
  pool: Pool;
  queries: Queries;
  log: Logger;
  claimTimeoutMs: number;
  logDeliveries: boolean;
  /** Where the dispatch jobs of new events go, off the answer's path (enqueue-relay.ts). */
  relay: EnqueueRelay;
  faults: Faults;
  now: () => number;
}

/**
 * Claims one batch and answers each of its deliveries after the commit; `recordOutcome` tells
 * the circuit whether the database was unavailable (or silent past the deadline).
 */
export async function claimAndAnswer(deps: BatchDeps, batch: Waiting[], recordOutcome: (unavailable: boolean) => void): Promise<void> {
  const folded = foldRepeats(batch);
  const claiming = claimBatch(deps, folded.unique, folded.copies);
  // The batch is answered by its earliest delivery's deadline: time spent waiting for the batch
  // to start (other batches holding every slot) is not given again.
  const due = Math.min(...batch.map((w) => w.deadline));
  // mutant: claim-deadline-off
  const claimed = await withinDeadline(claiming, Math.max(1, due - deps.now()));
  if (claimed === 'timeout') {
    // The database did not answer in time: answer 503 now (the provider retries). The
    // statement is cut by its query_timeout; if it commits anyway, its new events are still
    // enqueued and the retry is a duplicate.
    recordOutcome(true);
    const error = new OverloadedError(
      `ingest cannot record deliveries right now: the database did not answer within ${deps.claimTimeoutMs} ms; retry later (if this delivery was recorded after all, the retry is answered as a duplicate)`,
    );
    for (const waiter of batch) waiter.reject(error);
    const late = await claiming;
    if (!late.enqueued) deps.relay.push(newEventJobs(folded.unique, late.results));
    return;
  }
  recordOutcome(claimed.unavailable);
  // Committed: the rows are durable, the answers can go. The new events' jobs go to the
  // relay, which adds them after the answers, in bulk (Redis is not on the answer's path),
  // unless the statement inserted them itself (Postgres: insert on claim).
  await deps.faults.hit('ingest.after-claim');
  // mutant: claim-outbox-relayed-too
  if (!claimed.enqueued) deps.relay.push(newEventJobs(folded.unique, claimed.results));
  answerBatch(batch, folded, claimed.results);
  logConcurrentDuplicates(deps, folded, claimed.results);
}

/** Folds repeats of a key inside the batch onto its first occurrence: one claim per key. */
function foldRepeats(batch: Waiting[]): FoldedBatch {
  const firstIndex = new Map<string, number>();
  const unique: VerifiedEvent[] = [];
  const copies: number[] = [];
  const slot = batch.map((w) => {
    const key = eventKey(w.event.source, w.event.eventId);
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
  return { unique, copies, slot };
}

/**
 * Claims the batch's distinct events in one statement. `unavailable` says the database could
 * not be reached (every delivery fails; the circuit counts it). Any other failure of a batch of
 * several means something in it poisoned the statement: claimed one by one, so only it fails.
 * `enqueued`: the statement inserted the new events' jobs itself (QUEUE_BACKEND=postgres,
 * insert on claim: the relay's `inClaim`); otherwise they go to the relay after the commit.
 */
async function claimBatch(deps: BatchDeps, events: VerifiedEvent[], copies: number[]): Promise<{ results: Claimed; unavailable: boolean; enqueued: boolean }> {
  // mutant: statement-cut-before-deadline
  const limit = { timeoutMs: deps.claimTimeoutMs + STATEMENT_CUT_AFTER_DEADLINE_MS, logDeliveries: deps.logDeliveries };
  const jobs = await deps.relay.inClaim(() => events.map(dispatchJobOf));
  try {
    const results = await claimConflictsRetried(deps.log, () => deps.queries.claimEvents(deps.pool, events, { ...limit, copies, jobs }));
    return { results, unavailable: false, enqueued: jobs !== undefined };
  } catch (error) {
    const unavailable = isDatabaseUnavailableError(error);
    // mutant: poison-fails-batch
    if (unavailable || events.length === 1) return { results: events.map(() => ({ error })), unavailable, enqueued: false };
    // Something in the batch poisoned the statement: claim one by one, so only it fails (their
    // jobs through the relay).
    deps.log.warn({ err: error, events: events.length }, 'a batch of claims failed; claiming its deliveries one by one');
    const results = await Promise.all(
      events.map((event) => claimConflictsRetried(deps.log, () => deps.queries.claimEvent(deps.pool, event, limit)).catch((e: unknown) => ({ error: e }))),
    );
    return { results, unavailable: false, enqueued: false };
  }
}

/**
 * A claim statement that lost a race (a deadlock, a serialization failure, a delivery-log row
 * whose event retention just deleted: isClaimConflictError) rolled back whole: it stored
 * nothing, so running it again is safe, and answers what the database holds now. Never
 * answered as a failure while another transaction committed the rows. Bounded: a statement
 * that keeps losing fails like any other (one by one, then 500 for the one that fails).
 */
async function claimConflictsRetried<T>(log: Logger, claim: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await claim();
    } catch (error) {
      // mutant: claim-conflict-not-retried
      if (!isClaimConflictError(error) || attempt >= CLAIM_CONFLICT_ATTEMPTS) throw error;
      log.info({ err: error, attempt }, 'a claim statement lost a race with another transaction; running it again');
    }
  }
}

/** Resolves with the work, or with 'timeout' after `ms`, whichever comes first. */
async function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** An event's dispatch job but its row id (the worker creates its handler runs). */
function dispatchJobOf(event: VerifiedEvent): Omit<EventJobData, 'rowId'> {
  return {
    source: event.source,
    eventId: event.eventId,
    kind: event.kind,
    type: event.type,
    attempt: 0,
    ...(event.traceparent ? { trace: event.traceparent } : {}),
  };
}

/** The dispatch jobs of the events a claim created. */
function newEventJobs(unique: VerifiedEvent[], results: Claimed): EventJobData[] {
  const fresh: EventJobData[] = [];
  results.forEach((result, i) => {
    if ('outcome' in result && result.outcome === 'new') fresh.push({ rowId: result.rowId, ...dispatchJobOf(unique[i]!) });
  });
  return fresh;
}

/**
 * Answers every delivery of a committed batch: its distinct event's result, `duplicate-
 * concurrent` for a repeat inside the batch (its first occurrence's claim has committed), the
 * error for a claim that failed (never a 2xx).
 */
function answerBatch(batch: Waiting[], folded: FoldedBatch, results: Claimed): void {
  batch.forEach((waiter, i) => {
    const { index, repeat } = folded.slot[i]!;
    const result = results[index]!;
    // mutant: ack-failed-claim
    if ('error' in result) waiter.reject(result.error);
    else if (repeat) waiter.resolve({ outcome: 'duplicate-concurrent' });
    else waiter.resolve(result);
  });
}

/**
 * Duplicates of a row committed after the statement's snapshot were not in its delivery log;
 * records them now (after the answers: the log is for operators, never on the path).
 */
function logConcurrentDuplicates(deps: BatchDeps, folded: FoldedBatch, results: Claimed): void {
  const concurrent = folded.unique.flatMap((event, i) => {
    const result = results[i];
    return result && 'outcome' in result && result.outcome === 'duplicate-concurrent' ? [{ event, copies: folded.copies[i] ?? 1 }] : [];
  });
  if (concurrent.length === 0 || !deps.logDeliveries) return;
  deps.queries
    .logDeliveries(
      deps.pool,
      concurrent.map((c) => ({ source: c.event.source, eventId: c.event.eventId, bodyHash: c.event.bodyHash ?? null, copies: c.copies })),
    )
    .catch((error: unknown) => {
      deps.log.debug({ err: error }, 'could not log concurrent duplicate deliveries');
    });
}
