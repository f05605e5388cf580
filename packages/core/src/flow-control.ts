/**
 * Flow control: the one owner of how a handler's declared limits (concurrency, rateLimit,
 * pause, priority) become decisions. The counting lives in Postgres beside the runs
 * (store/flow.ts), so a limit holds across workers, hosts, queue backends and a lost Redis; a
 * run over a limit waits (`received` with a reason, its attempts untouched) and is woken by the
 * run that frees its slot or scheduled for its rate window. How and why: docs/flow-control.md
 * and docs/architecture.md, "Flow control".
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
    source: event.source,
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
  job: Pick<EventJobData, 'rowId' | 'source' | 'eventId' | 'attempt' | 'generation' | 'wait'>,
  event: EventRow | null,
  leaseMs: number,
): GateRequest {
  const { concurrency, rateLimit } = handler.limits;
  const view = event ? keyEvent(handler, event, job) : null;
  const keyed = (what: string, fn: ((event: HandlerEvent) => string) | undefined) => (fn && view ? keyOf(what, fn, view) : null);
  return {
    rowId: job.rowId,
    source: job.source,
    eventId: job.eventId,
    handler: handler.name,
    token: randomUUID(),
    leaseMs,
    wait: job.wait ?? null,
    ...(concurrency ? { concurrency: { limit: concurrency.limit, key: keyed('concurrency', concurrency.key) } } : {}),
    ...(rateLimit ? { rate: { limit: rateLimit.limit, periodMs: rateLimit.periodMs, key: keyed('rateLimit', rateLimit.key) ?? '' } } : {}),
  };
}
