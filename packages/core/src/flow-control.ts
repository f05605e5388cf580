/**
 * Flow control: the one owner of how a handler's declared limits become decisions
 * (docs/flow-control.md). Where the counting lives, and why: in Postgres, beside the runs.
 *
 * - concurrency: the slots ARE the handler's runs in progress under a live lease (per key when
 *   keyed). A run takes a slot by taking its lease inside a transaction that holds the
 *   (handler, key) advisory lock and counts first (store/flow.ts, gateAcquire). Nothing to
 *   release: a finished run is no longer `processing`, a crashed worker's run stops counting
 *   when its lease expires, and the count is the same for every worker, host and queue backend.
 * - rateLimit: a fixed window per (handler, key) in `rate_windows`, one upsert per start, in
 *   the same transaction as the lease (a lease not taken gives its start back).
 * - pause: rows in `pauses`, checked by the lease statements themselves (so a worker that
 *   starts later, or never heard of the pause, obeys it).
 * Not BullMQ's limiter: it limits a whole queue, not a handler or a key (per-group limits are
 * BullMQ Pro's), and on Redis it would be lost with Redis, while a limit must survive that.
 *
 * A run over a limit WAITS: it stays `received` with a reason (`waiting`), its attempts
 * untouched. For a slot it has no job: the run of the same handler and key that ends wakes the
 * longest waiter (its job at the front of the queue), and the reconciler wakes the waiters of a
 * group with a free slot whose wake-up was lost; a gate that finds the slot's lock busy joins
 * the line without waiting for the lock and looks once more after its commit. For the rate, a
 * job of its own is scheduled for the window its turn is expected in (the runs that waited
 * longer, a limit's worth per window, counted up to RATE_WINDOWS_AHEAD windows). Every wait and wake-up bumps the run's fence
 * (`waits`), carried by its job: a stale job never schedules another, so each waiting run has
 * at most one chain of jobs, whatever duplicates recovery creates.
 *
 * A limited run's calls never outlive its lease (lease-clock.ts): a slot passes to another run
 * only when the lease is gone, so the downstream never sees more than the limit at once.
 *
 * Priority: a run of a handler below the best priority loaded is not run inside its event's
 * dispatch but gets a job with a BullMQ priority; dispatch jobs (no priority) and better runs go
 * first. A run waiting longer than PRIORITY_AGING_MS is re-enqueued without priority by the
 * reconciler (never starved).
 */
import { randomUUID } from 'node:crypto';
import { describeError } from '@oncehook/shared';
import type { EventJobData, EventRow } from './vocabulary.js';
import type { Handler, HandlerEvent, HandlerPriority } from '@oncehook/sdk';
import type { GateRequest } from './store/queries.js';

/** A run of a lower-priority handler waiting this long in the queue is moved to its front. */
export const PRIORITY_AGING_MS = 60_000;

/** How long a run waiting for the rate waits: to the next window, plus a little jitter (so the waiters do not all come at once). */
export function rateWaitMs(periodMs: number, now = Date.now()): number {
  return periodMs - (now % periodMs) + Math.floor(Math.random() * Math.min(250, periodMs / 4));
}

const LEVEL: Record<HandlerPriority, number> = { high: 1, normal: 2, low: 3 };

/** 1 (high) to 3 (low). */
export function priorityLevel(handler: Pick<Handler, 'priority'>): number {
  return LEVEL[handler.priority ?? 'normal'];
}

/** Whether a run of this handler goes through the gate (it has a concurrency or a rate limit). */
export function isGated(handler: Handler | undefined): handler is Handler & { limits: NonNullable<Handler['limits']> } {
  return handler?.limits?.concurrency !== undefined || handler?.limits?.rateLimit !== undefined;
}

const KEY_MAX = 200;

function keyOf(what: string, fn: (event: HandlerEvent) => string, event: HandlerEvent): string {
  let key: unknown;
  try {
    key = fn(event);
  } catch (error) {
    throw new Error(`${what}.key threw: ${describeError(error)}`);
  }
  if (typeof key !== 'string' || key.length === 0 || key.length > KEY_MAX) {
    throw new Error(
      `${what}.key must return a non-empty string of at most ${KEY_MAX} characters; it returned ${typeof key === 'string' ? `a string of ${key.length}` : (JSON.stringify(key) ?? String(key))}`,
    );
  }
  return key;
}

/** The event as a key function sees it (its payload parsed by the handler's schema, when it has one). */
export function keyEvent(handler: Handler, event: EventRow, job: Pick<EventJobData, 'attempt' | 'generation'>): HandlerEvent {
  const parsed = handler.payloadSchema?.safeParse(event.payload);
  return {
    source: event.provider,
    kind: event.kind,
    eventId: event.eventId,
    type: event.type,
    payload: parsed?.success ? parsed.data : event.payload,
    meta: event.meta,
    receivedAt: event.receivedAt,
    signedAt: event.signedAt,
    attempt: job.attempt + 1,
    generation: job.generation ?? 0,
    handler: handler.name,
  };
}

/** Whether the handler's limits need the event (a key function). */
export function needsEvent(handler: Handler): boolean {
  return handler.limits?.concurrency?.key !== undefined || handler.limits?.rateLimit?.key !== undefined;
}

/**
 * The gate's request for one run: the handler's limits, with its keys computed from the event.
 * A key function that throws or returns something else: an Error saying so (the caller fails
 * the run: no limit can be applied to it, and running it unlimited would break the promise).
 */
export function gateRequest(
  handler: Handler & { limits: NonNullable<Handler['limits']> },
  job: Pick<EventJobData, 'rowId' | 'provider' | 'eventId' | 'attempt' | 'generation' | 'wait'>,
  event: EventRow | null,
  leaseMs: number,
): GateRequest {
  const { concurrency, rateLimit } = handler.limits;
  const view = event ? keyEvent(handler, event, job) : null;
  const keyed = (what: string, fn: ((event: HandlerEvent) => string) | undefined) => (fn && view ? keyOf(what, fn, view) : null);
  return {
    rowId: job.rowId,
    provider: job.provider,
    eventId: job.eventId,
    handler: handler.name,
    token: randomUUID(),
    leaseMs,
    wait: job.wait ?? null,
    ...(concurrency ? { concurrency: { limit: concurrency.limit, key: keyed('concurrency', concurrency.key) } } : {}),
    ...(rateLimit ? { rate: { limit: rateLimit.limit, periodMs: rateLimit.periodMs, key: keyed('rateLimit', rateLimit.key) ?? '' } } : {}),
  };
}
