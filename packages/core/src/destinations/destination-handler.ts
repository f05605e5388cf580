/**
 * A destination is a handler run whose one external step is the call (docs/destinations.md):
 * so leases, the fence, the recorded step, flow control, fan-out beside code handlers,
 * re-drive (the same key) and replay (a new key), the timeline, traces and metrics all apply
 * unchanged. This file makes that handler from a destination's configuration.
 *
 * - It takes the events of its sources and types (globs): `selects`, asked by the registry.
 * - Its filter is read from the payload in the run: an event it does not take ends the run
 *   `done` with a recorded step `filtered-out` saying which condition failed (the timeline
 *   answers "why did my service not get this event?"), and no call is made.
 * - The call is the external step `deliver`: its idempotency key is the `webhook-id` and the
 *   `Idempotency-Key` the receiver deduplicates on, the same for this event, destination and
 *   generation on every attempt, crash, takeover and re-drive; a replay starts a new generation,
 *   hence a new key.
 * - What the receiver gets is the envelope (envelopeOf): the provider's payload as JSON with
 *   the event's source, type, provider id and times, the same bytes on every attempt.
 */
import { type Destination, destinationTakes, filterProblem, valueAt } from './destination-config.js';
import { defineHandler, type Handler, type HandlerEvent } from '@oncehook/sdk';
import { forward, type ForwardObserver } from './forward.js';
import type { Selecting } from '../registry.js';

/** A handler made from a destination: it chooses its events itself (registry.ts, `Selecting`). */
export interface DestinationHandler extends Handler, Selecting {
  readonly destination: Destination;
}

/**
 * The body of every call (docs/destinations.md, "What your service receives"). Oncehook keeps
 * the payload as JSON, not the provider's bytes, so the envelope carries the same JSON value
 * (key order and number formatting may differ from the original bytes; the provider's own
 * signature does not apply to it: your service verifies Oncehook's).
 */
export function envelopeOf(event: HandlerEvent, id: string, destination: string): string {
  return JSON.stringify({
    id,
    destination,
    source: event.source,
    kind: event.kind,
    type: event.type,
    eventId: event.eventId,
    receivedAt: event.receivedAt,
    signedAt: event.signedAt,
    generation: event.generation,
    data: event.payload,
  });
}

/** A key function from a JSON path into the payload (concurrency and rate keys). */
function keyAt(path: string, what: string): (event: HandlerEvent) => string {
  return (event) => {
    const value = valueAt(event.payload, path);
    if (typeof value === 'string' && value !== '') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw new Error(`the ${what} key ${path} is ${value === undefined ? 'missing' : `not a string or number (${JSON.stringify(value)?.slice(0, 60)})`} in this event`);
  };
}

export function destinationHandler(destination: Destination, observer: ForwardObserver = {}): DestinationHandler {
  const { concurrency, rateLimit } = destination;
  const handler = defineHandler(
    {
      name: destination.name,
      // For display (the admin, the logs); which events it takes is `selects`.
      source: destination.sources[0] === '*' ? 'any' : destination.sources[0]!,
      type: destination.types.join(','),
      description: destination.description ?? `forwards to ${destination.url.host}${destination.url.pathname}`,
      ...(destination.retries ? { retries: destination.retries } : {}),
      ...(destination.priority ? { priority: destination.priority } : {}),
      ...(destination.circuitBreaker ? { circuitBreaker: destination.circuitBreaker } : {}),
      ...(concurrency ? { concurrency: concurrency.key ? { limit: concurrency.limit, key: keyAt(concurrency.key, 'concurrency') } : concurrency.limit } : {}),
      ...(rateLimit ? { rateLimit: { limit: rateLimit.limit, period: rateLimit.period, ...(rateLimit.key ? { key: keyAt(rateLimit.key, 'rateLimit') } : {}) } } : {}),
    } as Parameters<typeof defineHandler>[0],
    async (event: HandlerEvent, ctx) => {
      // mutant: destination-filter-ignored
      const skip = filterProblem(destination.filter, event.payload);
      if (skip) {
        await ctx.transaction('filtered-out', async () => ({ filter: skip }), { final: true });
        return;
      }
      await ctx.step('deliver', async ({ idempotencyKey, signal }) => {
        // mutant: destination-key-per-attempt
        const body = envelopeOf(event, idempotencyKey, destination.name);
        return { ...(await forward(destination, { id: idempotencyKey, body, source: event.source, type: event.type, eventId: event.eventId, signal }, observer)) };
      });
    },
  );
  return Object.freeze({
    ...handler,
    destination,
    selects: (source: string, kind: string, type: string) => destinationTakes(destination, source, kind, type),
    label: `the destination "${destination.name}"`,
  });
}
