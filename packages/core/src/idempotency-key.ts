import { eventKeyDigest } from './event-key.js';

/**
 * The outbound idempotency key of one external step: deterministic in (source, event id,
 * handler, step name, generation), so every attempt of the step (retries, a resumed attempt
 * after a crash, another worker taking over) sends the SAME key and the downstream API
 * applies the effect at most once. Two handlers of one event get different keys; a deliberate
 * replay starts a new generation and so a new key.
 *
 * `keyScheme` 1 leaves the handler out: runs carried over from before handler names keep the
 * keys they were already sending (db/legacy-upgrade.sql), so nothing in flight changes key.
 *
 * `oncehook-` + 48 hex digits of sha256: fits every API's key limit (Stripe: 255) and says
 * where it came from in the downstream dashboard.
 */
export interface StepKeyInput {
  source: string;
  eventId: string;
  handler: string;
  step: string;
  generation: number;
  keyScheme: 1 | 2;
  /**
   * The domain object the effect is about (`ctx.step('charge', fn, { key: order.id })`). When
   * set, the key is derived from (source, subject, handler, step, generation) INSTEAD of the
   * event id: two events about one object (a body replayed under a new id, two topics that both
   * charge an order) send the same key, and the API applies the effect once.
   */
  subject?: string | null;
}

export function idempotencyKeyFor(input: StepKeyInput): string {
  // mutant: domain-key-ignored
  if (input.subject != null) {
    return `oncehook-${eventKeyDigest(input.source, '\u0001subject', input.subject, input.handler, input.step, String(input.generation)).slice(0, 48)}`;
  }
  // mutant: key-ignores-generation, key-ignores-handler, legacy-key-scheme
  const parts = input.keyScheme === 1 ? [input.step, String(input.generation)] : [input.handler, input.step, String(input.generation)];
  return `oncehook-${eventKeyDigest(input.source, input.eventId, ...parts).slice(0, 48)}`;
}
