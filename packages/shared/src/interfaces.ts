/**
 * Public types, and the words the code uses for things.
 *
 * Glossary
 * - delivery:   one HTTP request from a provider. A provider may deliver one event many times
 *               (retries, manual resends, concurrent duplicates).
 * - event:      the thing that happened at the provider, identified by a stable event id that
 *               is the same on every delivery of it. One row in `webhook_events`.
 * - provider:   the configured source name (the `:provider` in `/webhooks/:provider`), e.g.
 *               `stripe` or `stripe-eu`. Each is its own dedupe namespace.
 * - kind:       the signature scheme / provider family of a source (stripe, github, ...).
 * - event key:  (provider, event id): what deduplicates. Unique in Postgres; the BullMQ jobId
 *               is derived from it.
 * - claim:      the INSERT ... ON CONFLICT DO NOTHING at the edge that makes the first
 *               delivery of an event the only one that creates work.
 * - lease:      (lease_token, lease_until) on a row in `processing`: the right of one worker
 *               to work on the event until the lease expires. Renewed while the handler runs.
 * - fence:      the check of lease_token inside every transition and step transaction, so a
 *               worker whose lease was taken over can no longer commit anything.
 * - step:       a named recovery point of a handler. A committed step is recorded and never
 *               re-run for the same generation; a resumed attempt skips it.
 * - effect:     what a handler does in the world (a ledger credit, a charge, an email).
 *               Exactly once per event and generation.
 * - generation: replay counter of an event. Steps and outbound idempotency keys are per
 *               generation; a deliberate replay starts a new one.
 * - replay:     an operator re-running an event: a re-drive keeps the generation (finishes what
 *               was started, same keys); a new generation does it all again on purpose.
 */

/** What a provider adapter returns once a delivery's signature has been verified. */
export interface VerifiedEvent {
  /** Source name (dedupe namespace). */
  provider: string;
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
}

export type EventState = 'received' | 'processing' | 'done' | 'failed';

export const EVENT_STATES: readonly EventState[] = ['received', 'processing', 'done', 'failed'];

/** A row of `webhook_events`. */
export interface EventRow {
  id: number;
  provider: string;
  kind: string;
  eventId: string;
  type: string;
  payload: unknown;
  signedAt: Date | null;
  meta: Record<string, string>;
  state: EventState;
  attempts: number;
  generation: number;
  leaseToken: string | null;
  leaseUntil: Date | null;
  lastError: string | null;
  note: string | null;
  receivedAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** The payload of a BullMQ job: just enough to find the row. The row is the truth. */
export interface EventJobData {
  rowId: number;
  provider: string;
  eventId: string;
  /** The row's attempt count when the job was enqueued: the job runs attempt + 1. */
  attempt: number;
}
