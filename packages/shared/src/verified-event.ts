/**
 * What a provider's verification hands to the engine. The engine's own words (event, run,
 * claim, lease, fence, step...) are defined in @oncehook/core's `vocabulary.ts`.
 */

/** What a provider adapter returns once a delivery's signature has been verified. */
export interface VerifiedEvent {
  /** Source name (dedupe namespace). */
  source: string;
  /** Signature scheme / provider family. */
  kind: string;
  /** The provider's stable event id. */
  eventId: string;
  type: string;
  /** Creation time the provider signed, when the scheme signs one. */
  signedAt: Date | null;
  /** The raw body, verified; stored as jsonb. */
  rawBody: string;
  /** The parsed body. */
  payload: unknown;
  /** Provider-specific facts about the delivery worth keeping (stored as jsonb). */
  meta: Record<string, string>;
  /**
   * sha256 of the raw body, for sources whose event id (or type) travels outside the signature
   * (GitHub, Shopify, generic HMAC with a header id): a captured body replayed under a new id
   * is then a duplicate too. Null for sources that sign their ids.
   */
  bodyHash?: Buffer | null;
  /** The W3C traceparent of the delivery's span (tracing.ts); absent when tracing is off. */
  traceparent?: string;
}
