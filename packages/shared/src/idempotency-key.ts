import { createHash } from 'node:crypto';

/**
 * The outbound idempotency key of one external step: deterministic in (provider, event id,
 * step name, generation), so every attempt of the step (retries, a resumed attempt after a
 * crash, another worker taking over) sends the SAME key and the downstream API applies the
 * effect at most once. A deliberate replay starts a new generation and so a new key.
 *
 * `oncehook-` + 48 hex digits of sha256: fits every API's key limit (Stripe: 255) and says
 * where it came from in the downstream dashboard.
 */
export function idempotencyKeyFor(provider: string, eventId: string, step: string, generation: number): string {
  const digest = createHash('sha256').update(`${provider}\0${eventId}\0${step}\0${generation}`).digest('hex');
  return `oncehook-${digest.slice(0, 48)}`;
}
