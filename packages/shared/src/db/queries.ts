/**
 * Every runtime query against webhook_events and webhook_event_steps, as small parameterised
 * functions with explicit casts. Each guarded UPDATE documents what a 0-row result means:
 * that is where the exactly-once logic lives.
 */
import type { EventRow, EventState, VerifiedEvent } from '../interfaces';
import type { Pool } from './pool';

/** A pool or a client inside a transaction. */
export interface Queryable {
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

const EVENT_COLUMNS = `
  id, provider, kind, event_id AS "eventId", type, payload, signed_at AS "signedAt", meta, state,
  attempts, generation, lease_token AS "leaseToken", lease_until AS "leaseUntil",
  last_error AS "lastError", note, received_at AS "receivedAt", updated_at AS "updatedAt",
  finished_at AS "finishedAt"`;

// ---------------------------------------------------------------------------------------------
// The edge: claim.

export type ClaimResult =
  /** This delivery created the row: it is the one that causes work. */
  | { outcome: 'new'; rowId: number }
  /** The row existed; its state and last touch decide whether to nudge the queue. */
  | { outcome: 'duplicate'; rowId: number; state: EventState; updatedAt: Date; attempts: number }
  /**
   * The row was inserted by a transaction that committed after this statement's snapshot:
   * a concurrent duplicate. ON CONFLICT waited for that commit, so the row is durable; it is
   * fresh, so there is nothing to nudge.
   */
  | { outcome: 'duplicate-concurrent' };

/**
 * The claim, in one round trip for both outcomes.
 *
 * `INSERT ... ON CONFLICT (provider, event_id) DO NOTHING RETURNING` returns a row only for
 * the delivery that created it. If another transaction holds an uncommitted insert of the
 * same key, Postgres waits for it: on its commit we do nothing (duplicate), on its abort we
 * insert. The UNION branch reads the existing row for the duplicate answer; it runs in the
 * same statement snapshot, so it sees nothing if the winner committed after we started.
 *
 * The payload is handed to Postgres as the verified raw text and cast to jsonb there.
 */
export async function claimEvent(db: Queryable, event: VerifiedEvent): Promise<ClaimResult> {
  const { rows } = await db.query<{ id: number; inserted: boolean; state: EventState; updatedAt: Date; attempts: number }>(
    `WITH inserted AS (
       INSERT INTO webhook_events (provider, kind, event_id, type, payload, signed_at, meta)
       VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb)
       ON CONFLICT (provider, event_id) DO NOTHING
       RETURNING id, state, updated_at, attempts
     )
     SELECT id, true AS inserted, state, updated_at AS "updatedAt", attempts FROM inserted
     UNION ALL
     SELECT id, false AS inserted, state, updated_at AS "updatedAt", attempts
       FROM webhook_events
      WHERE provider = $1::text AND event_id = $3::text
        AND NOT EXISTS (SELECT 1 FROM inserted)`,
    [event.provider, event.kind, event.eventId, event.type, event.rawBody, event.signedAt, JSON.stringify(event.meta)],
  );
  const row = rows[0];
  if (!row) return { outcome: 'duplicate-concurrent' };
  if (row.inserted) return { outcome: 'new', rowId: row.id };
  return { outcome: 'duplicate', rowId: row.id, state: row.state, updatedAt: row.updatedAt, attempts: row.attempts };
}

/**
 * The claim for a batch of deliveries, in ONE round trip (ingest's group commit, see
 * apps/ingest/src/claim-batcher.ts). Same semantics as claimEvent, per event:
 * `INSERT ... SELECT FROM unnest(...) ON CONFLICT (provider, event_id) DO NOTHING RETURNING`
 * returns the rows this statement created; the UNION branch reads the existing rows for the
 * rest. Keys must be unique within the batch (the caller folds repeats). Results come back in
 * input order. A prepared statement (named), parsed once per connection.
 */
export async function claimEvents(db: Pool, events: VerifiedEvent[]): Promise<ClaimResult[]> {
  const columns = {
    provider: events.map((e) => e.provider),
    kind: events.map((e) => e.kind),
    eventId: events.map((e) => e.eventId),
    type: events.map((e) => e.type),
    payload: events.map((e) => e.rawBody),
    signedAt: events.map((e) => e.signedAt),
    meta: events.map((e) => JSON.stringify(e.meta)),
  };
  const { rows } = await db.query<{ provider: string; eventId: string; id: number; inserted: boolean; state: EventState; updatedAt: Date; attempts: number }>({
    name: 'oncehook-claim-events',
    text: `WITH input AS (
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
               AS t(provider, kind, event_id, type, payload, signed_at, meta)
           ), inserted AS (
             INSERT INTO webhook_events (provider, kind, event_id, type, payload, signed_at, meta)
             SELECT provider, kind, event_id, type, payload::jsonb, signed_at, meta::jsonb FROM input
             ON CONFLICT (provider, event_id) DO NOTHING
             RETURNING id, provider, event_id, state, updated_at, attempts
           )
           SELECT provider, event_id AS "eventId", id, true AS inserted, state, updated_at AS "updatedAt", attempts FROM inserted
           UNION ALL
           SELECT e.provider, e.event_id, e.id, false, e.state, e.updated_at, e.attempts
             FROM input i
             JOIN webhook_events e ON e.provider = i.provider AND e.event_id = i.event_id
            WHERE NOT EXISTS (SELECT 1 FROM inserted x WHERE x.provider = i.provider AND x.event_id = i.event_id)`,
    values: [columns.provider, columns.kind, columns.eventId, columns.type, columns.payload, columns.signedAt, columns.meta],
  });
  const byKey = new Map(rows.map((row) => [`${row.provider}\0${row.eventId}`, row]));
  return events.map((event): ClaimResult => {
    const row = byKey.get(`${event.provider}\0${event.eventId}`);
    if (!row) return { outcome: 'duplicate-concurrent' };
    if (row.inserted) return { outcome: 'new', rowId: row.id };
    return { outcome: 'duplicate', rowId: row.id, state: row.state, updatedAt: row.updatedAt, attempts: row.attempts };
  });
}

// ---------------------------------------------------------------------------------------------
// The worker: lease, fence, transitions.

/**
 * The guarded claim: received -> processing, or take over a processing row whose lease has
 * expired. Sets a fresh lease token (which fences out the previous holder) and counts the
 * attempt.
 *
 * Returns null (0 rows) when the event is not ours to run: it is done or failed, another
 * worker holds a live lease, or the row no longer exists. The caller acknowledges the job
 * and does nothing else.
 */
export async function acquireLease(db: Queryable, rowId: number, leaseToken: string, leaseMs: number): Promise<EventRow | null> {
  const { rows } = await db.query<EventRow>(
    `UPDATE webhook_events
        SET state = 'processing', lease_token = $2::uuid,
            lease_until = now() + $3::int * interval '1 millisecond',
            attempts = attempts + 1, updated_at = now()
      WHERE id = $1::bigint
        AND (state = 'received' OR (state = 'processing' AND lease_until < now()))
      RETURNING ${EVENT_COLUMNS}`,
    [rowId, leaseToken, leaseMs],
  );
  return rows[0] ?? null;
}

/**
 * Extends our lease while the handler runs. false (0 rows) = the lease is no longer ours
 * (it expired and was taken over, or the reconciler released it): stop and commit nothing.
 */
export async function renewLease(db: Queryable, rowId: number, leaseToken: string, leaseMs: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_events
        SET lease_until = now() + $3::int * interval '1 millisecond'
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    [rowId, leaseToken, leaseMs],
  );
  return rowCount === 1;
}

/**
 * The fence, taken as the first statement of every step transaction: locks the event row
 * (FOR NO KEY UPDATE, the same lock an UPDATE of it takes) and proves we still hold the
 * lease. While we hold this lock no one can take the lease over; if someone already did,
 * 0 rows: roll back, commit nothing. Returns the generation the steps belong to.
 */
export async function lockLeasedEvent(db: Queryable, rowId: number, leaseToken: string): Promise<{ generation: number } | null> {
  const { rows } = await db.query<{ generation: number }>(
    `SELECT generation FROM webhook_events
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
      FOR NO KEY UPDATE`,
    [rowId, leaseToken],
  );
  return rows[0] ?? null;
}

/**
 * processing -> done, fenced. false (0 rows) = our lease was taken over: another worker owns
 * the event now, and nothing we did may be reported as its outcome.
 */
export async function markDone(db: Queryable, rowId: number, leaseToken: string, note: string | null = null): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_events
        SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(),
            updated_at = now(), note = coalesce($3::text, note)
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    [rowId, leaseToken, note],
  );
  return rowCount === 1;
}

/**
 * processing -> received after a retryable error, fenced; the queue retries it after a
 * backoff. false (0 rows) = lease lost; the new owner decides what happens next.
 */
export async function releaseForRetry(db: Queryable, rowId: number, leaseToken: string, error: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_events
        SET state = 'received', lease_token = NULL, lease_until = NULL,
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    [rowId, leaseToken, error],
  );
  return rowCount === 1;
}

/**
 * processing -> failed (the dead letter state), fenced. false (0 rows) = lease lost.
 */
export async function markFailed(db: Queryable, rowId: number, leaseToken: string, error: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_events
        SET state = 'failed', lease_token = NULL, lease_until = NULL, finished_at = now(),
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    [rowId, leaseToken, error],
  );
  return rowCount === 1;
}

// ---------------------------------------------------------------------------------------------
// Steps (recovery points). Always called inside a transaction that holds the fence.

export async function findStep(db: Queryable, rowId: number, generation: number, name: string): Promise<{ result: unknown } | null> {
  const { rows } = await db.query<{ result: unknown }>(
    `SELECT result FROM webhook_event_steps
      WHERE event_row_id = $1::bigint AND generation = $2::int AND name = $3::text`,
    [rowId, generation, name],
  );
  return rows[0] ?? null;
}

/**
 * Records a completed step. The primary key (event, generation, name) makes a second record
 * of the same step a unique violation: it cannot happen under the fence, and if it ever
 * did, the transaction (with its domain writes) rolls back instead of applying twice.
 */
export async function recordStep(db: Queryable, rowId: number, generation: number, name: string, result: unknown): Promise<void> {
  await db.query(
    `INSERT INTO webhook_event_steps (event_row_id, generation, name, result)
     VALUES ($1::bigint, $2::int, $3::text, $4::jsonb)`,
    [rowId, generation, name, JSON.stringify(result ?? null)],
  );
}

// ---------------------------------------------------------------------------------------------
// The reconciler.

export interface EventRef {
  rowId: number;
  provider: string;
  eventId: string;
  /** Attempts so far: the next job is for attempt + 1 (see jobIdFor). */
  attempt: number;
}

/** SQL of takeStaleReceived ($1 olderThanMs, $2 limit); exported so tests can EXPLAIN it. */
export const STALE_RECEIVED_SQL = `UPDATE webhook_events SET updated_at = now()
      WHERE id = ANY(ARRAY(
        SELECT id FROM webhook_events
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
         ORDER BY updated_at
         LIMIT $2::int
         FOR UPDATE SKIP LOCKED))
        AND state = 'received'
      RETURNING id AS "rowId", provider, event_id AS "eventId", attempts AS attempt`;

/**
 * `received` rows untouched for `olderThanMs`: their job was lost (Redis flushed or failed
 * over, ingest died between commit and enqueue) or is sitting behind a backlog. Touches
 * updated_at on the rows it returns, so the same row is re-enqueued at most once per
 * `olderThanMs`, not on every pass. SKIP LOCKED: never wait behind a worker's claim.
 */
export async function takeStaleReceived(db: Queryable, olderThanMs: number, limit: number): Promise<EventRef[]> {
  const { rows } = await db.query<EventRef>(
    STALE_RECEIVED_SQL,
    [olderThanMs, limit],
  );
  return rows;
}

/** SQL of releaseExpiredLeases ($1 limit); exported so tests can EXPLAIN it. */
export const EXPIRED_LEASES_SQL = `UPDATE webhook_events
        SET state = 'received', lease_token = NULL, lease_until = NULL, updated_at = now(),
            last_error = 'lease expired during attempt ' || attempts || ' (worker crashed or hung)'
      WHERE id = ANY(ARRAY(
        SELECT id FROM webhook_events
         WHERE state = 'processing' AND lease_until < now()
         ORDER BY lease_until
         LIMIT $1::int
         FOR UPDATE SKIP LOCKED))
        AND state = 'processing' AND lease_until < now()
      RETURNING id AS "rowId", provider, event_id AS "eventId", attempts AS attempt`;

/**
 * processing -> received for rows whose lease expired: the worker died or hung. Clearing
 * the token fences the old holder out; the caller re-enqueues the rows. The attempt the
 * dead worker started stays counted, so an event that kills its worker every time still
 * reaches `failed`.
 */
export async function releaseExpiredLeases(db: Queryable, limit: number): Promise<EventRef[]> {
  const { rows } = await db.query<EventRef>(
    EXPIRED_LEASES_SQL,
    [limit],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Operator actions. Both are guarded UPDATEs that never touch an event a worker holds a live
// lease on: 0 rows = the event is not in a state the action applies to (or is leased).

export type OperatorMode = 'redrive' | 'replay';

/**
 * Re-drive: finish what was started, with the SAME generation (same outbound keys, committed
 * steps skipped). Applies to `failed`, to `received`, and to `processing` whose lease expired.
 * Attempts restart from 0. Returns the previous state, or null (0 rows: done, or leased).
 */
export async function redriveEvent(db: Queryable, rowId: number, actor: string, reason: string): Promise<{ fromState: EventState; ref: EventRef } | null> {
  const { rows } = await db.query<{ fromState: EventState; rowId: number; provider: string; eventId: string; generation: number }>(
    `WITH target AS (
       SELECT id, state FROM webhook_events
        WHERE id = $1::bigint
          AND (state IN ('failed', 'received') OR (state = 'processing' AND lease_until < now()))
        FOR UPDATE
     ), moved AS (
       UPDATE webhook_events e
          SET state = 'received', attempts = 0, lease_token = NULL, lease_until = NULL,
              finished_at = NULL, updated_at = now()
         FROM target t WHERE e.id = t.id
       RETURNING e.id, e.provider, e.event_id, e.generation, t.state AS from_state
     ), audit AS (
       INSERT INTO webhook_event_replays (event_row_id, mode, from_state, generation, actor, reason)
       SELECT id, 'redrive', from_state, generation, $2::text, $3::text FROM moved
     )
     SELECT from_state AS "fromState", id AS "rowId", provider, event_id AS "eventId", generation FROM moved`,
    [rowId, actor, reason],
  );
  const row = rows[0];
  return row ? { fromState: row.fromState, ref: { rowId: row.rowId, provider: row.provider, eventId: row.eventId, attempt: 0 } } : null;
}

/**
 * Replay: do it all again on purpose, as a NEW generation (new outbound idempotency keys, no
 * step skipped). Applies to `done` and `failed` only, never to an event in flight. Returns the
 * previous state and the new generation, or null (0 rows: not finished).
 */
export async function replayEvent(db: Queryable, rowId: number, actor: string, reason: string): Promise<{ fromState: EventState; generation: number; ref: EventRef } | null> {
  const { rows } = await db.query<{ fromState: EventState; rowId: number; provider: string; eventId: string; generation: number }>(
    `WITH target AS (
       SELECT id, state FROM webhook_events WHERE id = $1::bigint AND state IN ('done', 'failed') FOR UPDATE
     ), moved AS (
       UPDATE webhook_events e
          SET state = 'received', generation = e.generation + 1, attempts = 0, last_error = NULL,
              note = NULL, finished_at = NULL, updated_at = now()
         FROM target t WHERE e.id = t.id
       RETURNING e.id, e.provider, e.event_id, e.generation, t.state AS from_state
     ), audit AS (
       INSERT INTO webhook_event_replays (event_row_id, mode, from_state, generation, actor, reason)
       SELECT id, 'replay', from_state, generation, $2::text, $3::text FROM moved
     )
     SELECT from_state AS "fromState", id AS "rowId", provider, event_id AS "eventId", generation FROM moved`,
    [rowId, actor, reason],
  );
  const row = rows[0];
  return row ? { fromState: row.fromState, generation: row.generation, ref: { rowId: row.rowId, provider: row.provider, eventId: row.eventId, attempt: 0 } } : null;
}

export interface EventFilter {
  state?: EventState;
  provider?: string;
  type?: string;
  /** Only events received at least this many seconds ago. */
  olderThanSeconds?: number;
  limit?: number;
}

export interface EventSummary {
  id: number;
  provider: string;
  eventId: string;
  type: string;
  state: EventState;
  attempts: number;
  generation: number;
  lastError: string | null;
  receivedAt: Date;
  updatedAt: Date;
}

export async function listEvents(db: Queryable, filter: EventFilter): Promise<EventSummary[]> {
  const { rows } = await db.query<EventSummary>(
    `SELECT id, provider, event_id AS "eventId", type, state, attempts, generation, last_error AS "lastError",
            received_at AS "receivedAt", updated_at AS "updatedAt"
       FROM webhook_events
      WHERE ($1::text IS NULL OR state = $1::text)
        AND ($2::text IS NULL OR provider = $2::text)
        AND ($3::text IS NULL OR type = $3::text)
        AND ($4::int IS NULL OR received_at < now() - $4::int * interval '1 second')
      ORDER BY updated_at DESC
      LIMIT $5::int`,
    [filter.state ?? null, filter.provider ?? null, filter.type ?? null, filter.olderThanSeconds ?? null, filter.limit ?? 50],
  );
  return rows;
}

export interface EventDetail {
  event: EventRow;
  steps: { generation: number; name: string; result: unknown; completedAt: Date }[];
  operatorActions: { mode: OperatorMode; fromState: string; generation: number; actor: string; reason: string; createdAt: Date }[];
}

export async function showEvent(db: Queryable, rowId: number): Promise<EventDetail | null> {
  const event = await getEvent(db, rowId);
  if (!event) return null;
  const steps = await db.query<EventDetail['steps'][number]>(
    `SELECT generation, name, result, completed_at AS "completedAt" FROM webhook_event_steps
      WHERE event_row_id = $1::bigint ORDER BY completed_at`,
    [rowId],
  );
  const actions = await db.query<EventDetail['operatorActions'][number]>(
    `SELECT mode, from_state AS "fromState", generation, actor, reason, created_at AS "createdAt"
       FROM webhook_event_replays WHERE event_row_id = $1::bigint ORDER BY created_at`,
    [rowId],
  );
  return { event, steps: steps.rows, operatorActions: actions.rows };
}

// ---------------------------------------------------------------------------------------------
// Gauges. Each count is answered from a partial index (received, processing, failed), so the
// cost does not grow with the number of done events.

export interface PendingCounts {
  received: number;
  receivedStale: number;
  processing: number;
  processingExpired: number;
  failed: number;
}

export async function pendingCounts(db: Queryable, staleAfterMs: number): Promise<PendingCounts> {
  const { rows } = await db.query<PendingCounts>(
    `SELECT
       (SELECT count(*) FROM webhook_events WHERE state = 'received')::int AS received,
       (SELECT count(*) FROM webhook_events WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond')::int AS "receivedStale",
       (SELECT count(*) FROM webhook_events WHERE state = 'processing')::int AS processing,
       (SELECT count(*) FROM webhook_events WHERE state = 'processing' AND lease_until < now())::int AS "processingExpired",
       (SELECT count(*) FROM webhook_events WHERE state = 'failed')::int AS failed`,
    [staleAfterMs],
  );
  return rows[0] ?? { received: 0, receivedStale: 0, processing: 0, processingExpired: 0, failed: 0 };
}

// ---------------------------------------------------------------------------------------------
// Retention.

/**
 * The providers present in the table, by a loose index scan of (provider, received_at): one
 * index probe per provider, however many rows there are.
 */
export async function distinctProviders(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ provider: string }>(
    `WITH RECURSIVE p AS (
       (SELECT provider FROM webhook_events ORDER BY provider LIMIT 1)
       UNION ALL
       SELECT (SELECT provider FROM webhook_events WHERE provider > p.provider ORDER BY provider LIMIT 1)
         FROM p WHERE p.provider IS NOT NULL
     )
     SELECT provider FROM p WHERE provider IS NOT NULL`,
  );
  return rows.map((row) => row.provider);
}

/**
 * SQL of deleteExpiredBatch ($1 provider, $2 days, $3 limit); exported so tests can EXPLAIN it.
 * Batch statements use `id = ANY(ARRAY(subquery))`, not `id IN (subquery)`: the planner then
 * touches the batch's rows by primary key instead of hash-joining it against a scan of the
 * whole table, which would make every batch cost grow with the table.
 */
export const RETENTION_DELETE_SQL = `DELETE FROM webhook_events
      WHERE id = ANY(ARRAY(
        SELECT id FROM webhook_events
         WHERE provider = $1::text AND state = 'done'
           AND received_at < now() - $2::int * interval '1 day'
         ORDER BY received_at
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED))`;

/**
 * Deletes one batch of one provider's done events received more than `days` ago, oldest first
 * (index webhook_events_done_retention_idx; steps and operator actions cascade). Failed events
 * are never deleted: they are dead letters waiting for a human. SKIP LOCKED: never waits
 * behind anyone. Returns the number deleted (< limit means the provider is caught up).
 */
export async function deleteExpiredBatch(db: Queryable, provider: string, days: number, limit: number): Promise<number> {
  const { rowCount } = await db.query(
    RETENTION_DELETE_SQL,
    [provider, days, limit],
  );
  return rowCount ?? 0;
}

// ---------------------------------------------------------------------------------------------
// Reads.

export async function getEvent(db: Queryable, rowId: number): Promise<EventRow | null> {
  const { rows } = await db.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM webhook_events WHERE id = $1::bigint`, [rowId]);
  return rows[0] ?? null;
}

export async function getEventByKey(db: Queryable, provider: string, eventId: string): Promise<EventRow | null> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM webhook_events WHERE provider = $1::text AND event_id = $2::text`,
    [provider, eventId],
  );
  return rows[0] ?? null;
}
