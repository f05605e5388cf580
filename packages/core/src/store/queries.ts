/**
 * Every runtime query against Oncehook's tables, as small parameterised functions with
 * explicit casts, built once per schema (`createQueries(schema)`). Each guarded UPDATE says
 * what a 0-row result means: that is where the exactly-once logic lives.
 *
 * Tables (see migrations/0001_schema.sql): events (one per event key), handler_runs (one per
 * event and handler: state, lease, attempts, generation), steps (recovery points per run and
 * generation), operator_actions (re-drives and replays).
 *
 * Run transitions and the event's state: every statement that moves a run in or out of
 * "pending" (received/processing) or `failed` also updates the event's counters and state in
 * the SAME statement: `WITH run AS (UPDATE handler_runs ... RETURNING ...) UPDATE events SET
 * runs_pending = runs_pending + d, state = CASE ... END FROM run`. Two runs of one event
 * finishing at once serialize on the event row, and the second re-evaluates its SET on the
 * row the first committed, so the event is `done` exactly when its last run is.
 */
import { createHash } from 'node:crypto';
import { advisoryLockKey } from '@oncehook/shared';
import type { EventJobData, EventRow, EventState, RunRow, RunState, StepKind, VerifiedEvent } from '@oncehook/shared';
import { schemaIdentifier } from '@oncehook/shared';
import type { Pool } from '@oncehook/shared';

/** A pool or a client inside a transaction. */
export interface Queryable {
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
  /** A named prepared statement (`prepared()`). */
  query<R extends object = Record<string, unknown>>(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: R[]; rowCount: number | null }>;
}

export type ClaimResult =
  /** This delivery created the row: it is the one that causes work. */
  | { outcome: 'new'; rowId: number }
  /**
   * The row existed (same event id, or same body for a source that deduplicates on it); its
   * state and last touch decide whether to nudge the queue. `type` is the stored row's (the
   * delivery's own may be forged in an unsigned header).
   */
  | { outcome: 'duplicate'; rowId: number; state: EventState; updatedAt: Date; type: string; sameBody: boolean }
  /**
   * The row was inserted by a transaction that committed after this statement's snapshot:
   * a concurrent duplicate. ON CONFLICT waited for that commit, so the row is durable; it is
   * fresh, so there is nothing to nudge.
   */
  | { outcome: 'duplicate-concurrent' };

export interface ClaimOptions {
  /** Record each delivery in the delivery log (default true; DELIVERY_LOG=off turns it off). */
  logDeliveries?: boolean;
  /**
   * Client-side bound on the statement (pg's query_timeout): past it the claim fails with
   * "Query read timeout" and, run through a Pool, the connection is destroyed, so a database
   * that stopped answering cannot keep pool connections forever. The statement may still
   * commit on the server: a claim that timed out is "unknown", never "not stored".
   */
  timeoutMs?: number;
}

/** pg reads query_timeout from a query's config too; its types list it on connections only. */
function readTimeout(options: ClaimOptions): { query_timeout?: number } {
  return options.timeoutMs === undefined ? {} : { query_timeout: options.timeoutMs };
}

/** A recorded step, as the worker reads it when it acquires a run. */
export interface RecordedStep {
  name: string;
  kind: StepKind | null;
  result: unknown;
  idempotencyKey: string | null;
  /** The domain object an external step's key was derived from (`ctx.step(name, fn, { key })`), else null. */
  keySubject: string | null;
}

/** A run this worker now holds the lease on, with its event and its recorded steps. */
export interface LeasedRun {
  run: RunRow;
  event: EventRow;
  /** Steps recorded for the run's current generation (earlier attempts, or a replay's reuse). */
  steps: RecordedStep[];
}

export type OperatorMode = 'redrive' | 'replay';

export interface EventFilter {
  state?: EventState;
  provider?: string;
  type?: string;
  /** Events with a run of this handler. */
  handler?: string;
  /** Only events received at least this many seconds ago. */
  olderThanSeconds?: number;
  limit?: number;
}

export interface RunSummary {
  id: number;
  handler: string;
  state: RunState;
  attempts: number;
  generation: number;
  lastError: string | null;
  updatedAt: Date;
}

export interface EventSummary {
  id: number;
  provider: string;
  eventId: string;
  type: string;
  state: EventState;
  note: string | null;
  receivedAt: Date;
  updatedAt: Date;
  runs: RunSummary[];
  /** Deliveries received (the first and its duplicates). */
  deliveries: number;
}

export interface StepRecord {
  runId: number;
  handler: string;
  generation: number;
  name: string;
  kind: StepKind | null;
  result: unknown;
  idempotencyKey: string | null;
  reusedFrom: number | null;
  completedAt: Date;
}

export interface OperatorAction {
  runId: number | null;
  handler: string | null;
  mode: OperatorMode;
  fromState: string;
  generation: number;
  actor: string;
  reason: string;
  detail: unknown;
  createdAt: Date;
}

/** One delivery of an event (the delivery log). */
export interface DeliveryRecord {
  receivedAt: Date;
  /** false for the delivery that created the event. */
  duplicate: boolean;
  /** A duplicate found by its body, under another id (body dedupe). */
  sameBody: boolean;
}

/** One attempt of a handler run: a lease taken, and its verdict (null: cut short, taken over). */
export interface AttemptRecord {
  runId: number;
  handler: string;
  generation: number;
  attempt: number;
  startedAt: Date;
  endedAt: Date | null;
  outcome: 'done' | 'failed' | 'retry' | null;
  error: string | null;
}

export interface EventDetail {
  event: EventRow;
  runs: RunRow[];
  steps: StepRecord[];
  operatorActions: OperatorAction[];
  /** Deliveries received (all of them, duplicates included; 0 with DELIVERY_LOG=off). */
  deliveryCount: number;
  /** The first DELIVERY_LOG_ROWS (100) deliveries, oldest first: the log keeps no more rows. */
  deliveries: DeliveryRecord[];
  /** When the latest delivery arrived (null: none logged). */
  lastDeliveryAt: Date | null;
  attempts: AttemptRecord[];
}

export interface PendingCounts {
  /** Events claimed, not dispatched yet. */
  eventsReceived: number;
  /** Of those, untouched for longer than the re-enqueue threshold. */
  eventsReceivedStale: number;
  runsReceived: number;
  runsReceivedStale: number;
  runsProcessing: number;
  runsProcessingExpired: number;
  /** Dead letters: runs in `failed`. */
  runsFailed: number;
}

/** What a re-drive or replay moved, to enqueue. */
export interface MovedRun {
  runId: number;
  handler: string;
  fromState: RunState;
  generation: number;
  job: EventJobData;
}

/**
 * Numbers a JavaScript double cannot hold (beyond +-1.8e308, or so small it reads as 0): jsonb
 * keeps them exactly and prints them written out in full (1e131071: 131,072 digits per read),
 * and no handler could have used them. The edge refuses them since migration 0008
 * (payload-limits.ts); this finds them in payloads stored before, without printing them.
 */
const UNREADABLE_NUMBERS_PATH = `strict $.** ? (@.type() == "number" && (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308 || (@ != 0 && @ < 4.9e-324 && @ > -4.9e-324)))`;

/**
 * True for a stored payload no process may read: from before the payload limits (no
 * payload_bytes) and holding such a number. Checked in the database on every read of the
 * payload, so the poison is never printed; for rows stored since 0008 it is one NULL test.
 */
const UNREADABLE_PAYLOAD = (alias: string) =>
  `(${alias}.payload_bytes IS NULL AND ${alias}.payload IS NOT NULL AND jsonb_path_exists(${alias}.payload, '${UNREADABLE_NUMBERS_PATH}'))`;

function eventColumns(alias: string): string {
  return `${alias}.id, ${alias}.provider, ${alias}.kind, ${alias}.event_id AS "eventId", ${alias}.type,
    CASE WHEN ${UNREADABLE_PAYLOAD(alias)} THEN NULL ELSE ${alias}.payload END AS payload, ${UNREADABLE_PAYLOAD(alias)} AS "payloadUnreadable",
    ${alias}.signed_at AS "signedAt", ${alias}.meta, ${alias}.state, ${alias}.runs_pending AS "runsPending",
    ${alias}.runs_failed AS "runsFailed", ${alias}.note, ${alias}.received_at AS "receivedAt",
    ${alias}.updated_at AS "updatedAt", ${alias}.finished_at AS "finishedAt", ${alias}.trace_parent AS "traceParent",
    ${alias}.pruned_at AS "prunedAt"`;
}

function runColumns(alias: string): string {
  return `${alias}.id, ${alias}.event_row_id AS "eventRowId", ${alias}.handler, ${alias}.state, ${alias}.attempts,
    ${alias}.generation, ${alias}.key_scheme AS "keyScheme", ${alias}.lease_token AS "leaseToken",
    ${alias}.lease_until AS "leaseUntil", ${alias}.last_error AS "lastError", ${alias}.note,
    ${alias}.created_at AS "createdAt", ${alias}.updated_at AS "updatedAt", ${alias}.finished_at AS "finishedAt"`;
}

/**
 * The event's new state after its counters change by (dPending, dFailed), as SQL over the
 * row's current values (which, in an UPDATE that waited for a lock, are the newest ones).
 */
const EVENT_STATE_AFTER = (dPending: string, dFailed: string) => `CASE
      WHEN e.runs_pending + ${dPending} > 0 THEN 'processing'
      WHEN e.runs_failed + ${dFailed} > 0 THEN 'failed'
      ELSE 'done' END`;

/**
 * A named prepared statement for the worker's hot path (one run's lease, steps and verdict):
 * Postgres parses and plans it once per connection instead of once per execution (pg keeps
 * the name per connection). The name carries a hash of the text, so two schemas (or two
 * versions of a query) never share one. Only for statements whose every parameter is matched
 * through a unique index, where a generic plan is the custom plan: the claim is NOT prepared
 * (a generic plan for its duplicate lookup was O(events); see MATCH_EXISTING).
 */
function prepared(name: string, text: string): (values: unknown[]) => { name: string; text: string; values: unknown[] } {
  const full = `oncehook_${name}_${createHash('sha256').update(text).digest('hex').slice(0, 12)}`;
  return (values) => ({ name: full, text, values });
}

/**
 * Stripes of a source's body hashes for the batched claim's lock order (claimEvents). 16: a
 * batch of 200 body-deduplicated deliveries takes 16 locks, not 200, and two small batches
 * of one source (2-5 deliveries each, the common case under moderate load) rarely share one.
 */
export const CLAIM_BODY_STRIPES = 16;

/**
 * Deliveries of one event the delivery log keeps in full (the first, and the 99 duplicates
 * after it); every later one is counted (delivery_counts: how many, and when the last came).
 * Enough for any timeline a person reads (a provider's retry schedule is under 30 deliveries),
 * and a bound on what a replayed capture can add for one event: 100 rows, not one per replay.
 */
export const DELIVERY_LOG_ROWS = 100;

export function createQueries(schemaName: string) {
  const S = schemaIdentifier(schemaName);
  const EVENTS = `${S}.events`;
  const RUNS = `${S}.handler_runs`;
  const STEPS = `${S}.steps`;
  const ACTIONS = `${S}.operator_actions`;
  const DELIVERIES = `${S}.deliveries`;
  const ATTEMPTS = `${S}.run_attempts`;
  const VERSIONS = `${S}.object_versions`;
  const DELIVERY_COUNTS = `${S}.delivery_counts`;

  /**
   * The delivery log, as CTEs that follow a claim in its own statement. `source` is a relation
   * with one row per input of the statement: (id: the event row, ord: its place in the input,
   * inserted: this input created the event, same_body, copies: deliveries of it folded into the
   * input). Every duplicate is counted (delivery_counts, an upsert ordered by event row, so two
   * statements wait for each other on it, never deadlock); a delivery gets a row of its own
   * only while its event has fewer than DELIVERY_LOG_ROWS. The count comes back from the
   * upsert under its row lock, so the bound holds under any concurrency.
   */
  const DELIVERY_LOG = (source: string) => `log_in AS (
         ${source}
       ), log_dups AS (
         SELECT id, sum(copies - inserted::int)::int AS n FROM log_in GROUP BY id
       ), log_counted AS (
         INSERT INTO ${DELIVERY_COUNTS} AS dc (event_row_id, duplicates, last_at)
         SELECT id, n, now() FROM log_dups WHERE n > 0 ORDER BY id
         ON CONFLICT (event_row_id) DO UPDATE SET duplicates = dc.duplicates + excluded.duplicates, last_at = excluded.last_at
         RETURNING event_row_id AS id, duplicates
       ), log_rows AS (
         -- Deliveries of the event before each input's duplicates: the first, those counted
         -- before this statement, and this statement's earlier inputs.
         SELECT l.id, l.inserted, l.same_body, l.copies - l.inserted::int AS dups,
                1 + coalesce(c.duplicates - d.n, 0)
                  + coalesce(sum(l.copies - l.inserted::int) OVER (PARTITION BY l.id ORDER BY l.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
           FROM log_in l JOIN log_dups d ON d.id = l.id LEFT JOIN log_counted c ON c.id = l.id
       ), logged AS (
         INSERT INTO ${DELIVERIES} (event_row_id, duplicate, same_body)
         SELECT id, false, false FROM log_rows WHERE inserted
         UNION ALL
         SELECT id, true, same_body FROM log_rows CROSS JOIN generate_series(1, greatest(0, least(dups, ${DELIVERY_LOG_ROWS} - before)::int))
       )`;

  // -------------------------------------------------------------------------------------------
  // The edge: claim.

  /** Advisory lock key of each (source, stripe), computed once. */
  const stripeKeys = new Map<string, string[]>();
  /** The distinct body stripes a batch touches, as lock keys (claimEvents sorts them in SQL). */
  function bodyStripeKeys(events: VerifiedEvent[]): string[] {
    const keys = new Set<string>();
    for (const event of events) {
      if (!event.bodyHash || event.bodyHash.length === 0) continue;
      let perSource = stripeKeys.get(event.provider);
      if (!perSource) {
        perSource = Array.from({ length: CLAIM_BODY_STRIPES }, (_v, i) => advisoryLockKey(schemaName, 'claim-body', `${event.provider}\0${i}`));
        stripeKeys.set(event.provider, perSource);
      }
      keys.add(perSource[event.bodyHash[0]! % CLAIM_BODY_STRIPES]!);
    }
    return [...keys];
  }

  /**
   * The existing event a delivery duplicates: by its id, else by its body. Two lookups, each an
   * exact match on one unique index (never `id = .. OR body_hash = ..`, which a generic plan may
   * turn into a scan of every event of the source: O(events) per duplicate), the id first.
   */
  const MATCH_EXISTING = (provider: string, eventId: string, bodyHash: string) => `SELECT m.* FROM (
             (SELECT e.*, 0 AS match_rank FROM ${EVENTS} e WHERE e.provider = ${provider} AND e.event_id = ${eventId})
             UNION ALL
             (SELECT e.*, 1 FROM ${EVENTS} e WHERE ${bodyHash} IS NOT NULL AND e.provider = ${provider} AND e.body_hash = ${bodyHash})
           ) m ORDER BY m.match_rank LIMIT 1`;

  /**
   * The claim, in one round trip for both outcomes. `INSERT ... ON CONFLICT DO NOTHING
   * RETURNING` returns a row only for the delivery that created it; without a conflict target
   * it stops at either unique key: (provider, event_id), or (provider, body_hash) for sources
   * that deduplicate on the body. If another transaction holds an uncommitted insert of the
   * same key, Postgres waits for it: on its commit we do nothing (duplicate), on its abort we
   * insert. The UNION branch reads
   * the existing row for the duplicate answer, in the same statement snapshot, so it sees
   * nothing if the winner committed after we started. The payload goes to Postgres as the
   * verified raw text and is cast to jsonb there.
   */
  async function claimEvent(db: Pool, event: VerifiedEvent, options: ClaimOptions = {}): Promise<ClaimResult> {
    const { rows } = await db.query<{ id: number; inserted: boolean; state: EventState; updatedAt: Date; type: string; sameBody: boolean }>({
      ...readTimeout(options),
      text: `WITH inserted AS (
         INSERT INTO ${EVENTS} (provider, kind, event_id, type, payload, signed_at, meta, body_hash, payload_bytes)
         VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb, $8::bytea, octet_length($5::text))
         ON CONFLICT DO NOTHING
         RETURNING id, state, updated_at, type
       ), result AS (
         SELECT id, true AS inserted, state, updated_at AS "updatedAt", type, false AS "sameBody" FROM inserted
         UNION ALL
         (SELECT id, false AS inserted, state, updated_at AS "updatedAt", type, event_id <> $3::text AS "sameBody"
            FROM (${MATCH_EXISTING('$1::text', '$3::text', '$8::bytea')}) e
           WHERE NOT EXISTS (SELECT 1 FROM inserted))
       )${
         // The delivery log (the timeline's deliveries), in the same round trip.
         options.logDeliveries === false ? '' : `, ${DELIVERY_LOG('SELECT id, 1 AS ord, inserted, "sameBody" AS same_body, 1 AS copies FROM result')}`
       }
       SELECT * FROM result`,
      values: [event.provider, event.kind, event.eventId, event.type, event.rawBody, event.signedAt, JSON.stringify(event.meta), event.bodyHash ?? null],
    });
    const row = rows[0];
    if (!row) return { outcome: 'duplicate-concurrent' };
    if (row.inserted) return { outcome: 'new', rowId: row.id };
    return { outcome: 'duplicate', rowId: row.id, state: row.state, updatedAt: row.updatedAt, type: row.type, sameBody: row.sameBody };
  }

  /**
   * The claim for a batch of deliveries, in ONE round trip (ingest's group commit, see
   * packages/core/src/claim-batcher.ts). Same semantics as claimEvent, per event. Keys must be
   * unique within the batch (the caller folds repeats). Results come back in input order.
   *
   * Lock order. A multi-row INSERT keeps every row it inserted (and so its keys) until it
   * commits, and waits on any key another transaction holds: two batches taking the same keys
   * in different orders (one ingest's [k1, k2], another's [k2, k1], as in a redelivery storm)
   * would deadlock, and Postgres finds a deadlock only after deadlock_timeout (1 s), past
   * CLAIM_TIMEOUT_MS. So every batch takes its locks in ONE global order:
   * - event ids: rows are inserted ordered by (provider, event_id);
   * - body hashes (a second unique key, sources that deduplicate on the body): a row's body
   *   hash is not in that order, so before inserting, the batch takes the advisory locks of the
   *   body stripes it touches (the hash's first byte modulo CLAIM_BODY_STRIPES, per source), in
   *   key order. Two batches that could conflict on a body hash share a stripe, so one waits
   *   for the other's COMMIT before it holds any row. Stripes, not one lock per hash: a batch
   *   holds at most CLAIM_BODY_STRIPES locks per source, whatever its size (Postgres's shared
   *   lock table is small: 64 x max_connections entries by default).
   * A single-row claim (claimEvent) needs neither: it holds no key while it waits.
   *
   * Deliberately NOT a named prepared statement: after five runs Postgres may switch a named
   * statement to a generic plan, and with parameters unknown (and a table whose statistics lag
   * its growth) one was seen looking duplicates up through the (provider, received_at) index,
   * reading every event of the source per duplicate. Unnamed, every batch gets a plan for its
   * values (~0.1 ms of planning), and the lookups stay on the unique indexes.
   */
  async function claimEvents(db: Pool, events: VerifiedEvent[], options: ClaimOptions & { copies?: number[] } = {}): Promise<ClaimResult[]> {
    const columns = {
      provider: events.map((e) => e.provider),
      kind: events.map((e) => e.kind),
      eventId: events.map((e) => e.eventId),
      type: events.map((e) => e.type),
      payload: events.map((e) => e.rawBody),
      signedAt: events.map((e) => e.signedAt),
      meta: events.map((e) => JSON.stringify(e.meta)),
      bodyHash: events.map((e) => e.bodyHash ?? null),
      // Deliveries of this key folded into the batch (the log records each one).
      copies: events.map((_e, i) => options.copies?.[i] ?? 1),
    };
    const { rows } = await db.query<{ ord: number; id: number; inserted: boolean; state: EventState; updatedAt: Date; type: string; sameBody: boolean }>({
      ...readTimeout(options),
      text: `WITH input AS (
               SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::bytea[], $9::int[])
                 WITH ORDINALITY AS t(provider, kind, event_id, type, payload, signed_at, meta, body_hash, copies, ord)
             ), body_stripes AS (
               -- The body-hash stripes this batch will insert into, locked in key order (the
               -- subquery's ORDER BY is what orders the calls) before any row is inserted.
               SELECT count(pg_advisory_xact_lock(k)) AS n FROM (SELECT k FROM unnest($10::bigint[]) AS k ORDER BY k) s
             ), inserted AS (
               -- Rows in one global order, (provider, event_id), never the batch's arrival order:
               -- two batches holding the same keys then wait for each other, never deadlock.
               INSERT INTO ${EVENTS} (provider, kind, event_id, type, payload, signed_at, meta, body_hash, payload_bytes)
               SELECT provider, kind, event_id, type, payload::jsonb, signed_at, meta::jsonb, body_hash, octet_length(payload)
                 FROM input CROSS JOIN body_stripes ORDER BY provider, event_id
               ON CONFLICT DO NOTHING
               RETURNING id, provider, event_id, state, updated_at, type, body_hash
             ), result AS (
               SELECT i.ord, x.id, true AS inserted, x.state, x.updated_at AS "updatedAt", x.type, false AS "sameBody"
                 FROM inserted x JOIN input i ON i.provider = x.provider AND i.event_id = x.event_id
               UNION ALL
               SELECT i.ord, e.id, false, e.state, e.updated_at, e.type, e.event_id <> i.event_id
                 FROM input i
                 CROSS JOIN LATERAL (${MATCH_EXISTING('i.provider', 'i.event_id', 'i.body_hash')}) e
                WHERE NOT EXISTS (SELECT 1 FROM inserted x WHERE x.provider = i.provider AND x.event_id = i.event_id)
               UNION ALL
               -- The same body as an event this very statement inserted under another id (a body
               -- dedupe source), and nothing older: invisible to the statement's snapshot, so
               -- matched on what the INSERT returned (the answer is then an exact duplicate,
               -- logged with the others, instead of a concurrent one the log would miss).
               SELECT i.ord, x.id, false, x.state, x.updated_at, x.type, true
                 FROM input i JOIN inserted x ON x.provider = i.provider AND x.body_hash = i.body_hash AND x.event_id <> i.event_id
                WHERE NOT EXISTS (SELECT 1 FROM ${EVENTS} e WHERE e.provider = i.provider AND e.event_id = i.event_id)
                  AND NOT EXISTS (SELECT 1 FROM ${EVENTS} e WHERE e.provider = i.provider AND e.body_hash = i.body_hash)
             )${
               // The delivery log (the timeline's deliveries), in the same round trip: every
               // delivery, the repeats folded into this batch included.
               options.logDeliveries === false
                 ? ''
                 : `, ${DELIVERY_LOG('SELECT r.id, r.ord, r.inserted, r."sameBody" AS same_body, i.copies FROM result r JOIN input i ON i.ord = r.ord')}`
             }
             SELECT * FROM result`,
      values: [
        columns.provider,
        columns.kind,
        columns.eventId,
        columns.type,
        columns.payload,
        columns.signedAt,
        columns.meta,
        columns.bodyHash,
        columns.copies,
        bodyStripeKeys(events),
      ],
    });
    const byOrd = new Map(rows.map((row) => [Number(row.ord), row]));
    return events.map((_event, i): ClaimResult => {
      const row = byOrd.get(i + 1);
      if (!row) return { outcome: 'duplicate-concurrent' };
      if (row.inserted) return { outcome: 'new', rowId: row.id };
      return { outcome: 'duplicate', rowId: row.id, state: row.state, updatedAt: row.updatedAt, type: row.type, sameBody: row.sameBody };
    });
  }

  /**
   * Delivery-log rows for duplicates whose event the claim could not see (committed after its
   * snapshot): looked up now that it is committed, by id, else by body (a duplicate found by
   * its body under another id has no row of its own id). Never on a delivery's path.
   */
  async function logDeliveries(db: Queryable, deliveries: { provider: string; eventId: string; bodyHash: Buffer | null; copies: number }[]): Promise<void> {
    await db.query(
      `WITH ${DELIVERY_LOG(`SELECT e.id, k.ord, false AS inserted, e.event_id <> k.event_id AS same_body, k.copies
           FROM unnest($1::text[], $2::text[], $3::bytea[], $4::int[]) WITH ORDINALITY AS k(provider, event_id, body_hash, copies, ord)
           CROSS JOIN LATERAL (${MATCH_EXISTING('k.provider', 'k.event_id', 'k.body_hash')}) e`)}
       SELECT 1`,
      [deliveries.map((d) => d.provider), deliveries.map((d) => d.eventId), deliveries.map((d) => d.bodyHash), deliveries.map((d) => d.copies)],
    );
  }

  // -------------------------------------------------------------------------------------------
  // The worker: dispatch, lease, fence, transitions.

  const DISPATCH_AND_LEASE_SQL = prepared(
    'dispatchAndLease',
    `WITH ev AS (
         UPDATE ${EVENTS} SET state = 'processing', runs_pending = cardinality($2::text[]), updated_at = now(),
                trace_parent = coalesce($5::text, trace_parent)
          WHERE id = $1::bigint AND state = 'received'
         RETURNING *
       ), created AS (
         INSERT INTO ${RUNS} AS r (event_row_id, handler, state, attempts, lease_token, lease_until)
         SELECT ev.id, h.handler, 'processing', 1, h.token, now() + $4::int * interval '1 millisecond'
           FROM ev, unnest($2::text[], $3::uuid[]) AS h(handler, token)
         ON CONFLICT (event_row_id, handler) DO NOTHING
         RETURNING ${runColumns('r')}
       ), attempt AS (
         INSERT INTO ${ATTEMPTS} (run_id, lease_token, generation, attempt)
         SELECT id, "leaseToken", generation, attempts FROM created
       )
       SELECT (SELECT row_to_json(x) FROM (SELECT ${eventColumns('ev')} FROM ev) x) AS event,
              (SELECT json_agg(c) FROM created c) AS runs
        WHERE EXISTS (SELECT 1 FROM ev)`,
  );
  /**
   * Dispatch: received -> processing, creating one run per handler AND leasing them all to the
   * caller, in one statement (each run starts `processing`, attempt 1, with its own token).
   * Returns the event and the leased runs; null (0 rows) = the event is not `received` (already
   * dispatched, finished, or gone): the caller looks for claimable runs instead. Two workers
   * dispatching at once serialize on the event row; the second finds it `processing`.
   */
  async function dispatchAndLease(
    db: Queryable,
    rowId: number,
    runs: { handler: string; token: string }[],
    leaseMs: number,
    /** The delivery's traceparent (from the dispatch job), kept on the event for later leases. */
    traceParent: string | null = null,
  ): Promise<{ event: EventRow; runs: RunRow[] } | null> {
    const { rows } = await db.query<{ event: EventRow; runs: RunRow[] | null }>(
      DISPATCH_AND_LEASE_SQL([rowId, runs.map((r) => r.handler), runs.map((r) => r.token), leaseMs, traceParent]),
    );
    const row = rows[0];
    if (!row) return null;
    return { event: reviveEvent(row.event), runs: (row.runs ?? []).map(reviveRun) };
  }

  const FINISH_UNHANDLED_SQL = prepared(
    'finishUnhandled',
    `UPDATE ${EVENTS} SET state = $2::text, note = $3::text, finished_at = now(), updated_at = now()
        WHERE id = $1::bigint AND state = 'received'`,
  );
  /**
   * An event with no handler: received -> done (or failed, per UNHANDLED_EVENTS) with a note.
   * false (0 rows) = the event was dispatched or finished meanwhile.
   */
  async function finishUnhandled(db: Queryable, rowId: number, state: 'done' | 'failed', note: string): Promise<boolean> {
    const { rowCount } = await db.query(FINISH_UNHANDLED_SQL([rowId, state, note]));
    return rowCount === 1;
  }

  /** The attempt log of a lease just taken (the CTE `leased`): one row per lease token. */
  const ATTEMPT_LOG = `attempt AS (
         INSERT INTO ${ATTEMPTS} (run_id, lease_token, generation, attempt)
         SELECT id, "leaseToken", generation, attempts FROM leased
       )`;
  /** The verdict of our lease in the attempt log (CTE `run` returning id; $2 our token). */
  const ATTEMPT_VERDICT = (outcome: string, error: string) => `verdict AS (
         UPDATE ${ATTEMPTS} a SET ended_at = now(), outcome = '${outcome}', error = ${error}
           FROM run WHERE a.run_id = run.id AND a.lease_token = $2::uuid
       )`;

  /**
   * What a lease statement returns: the run and its event. NOT its recorded steps: those are
   * read by a statement of their own once the lease is ours (stepsOfLeasedRuns), see there.
   */
  const LEASED_RUN_RETURNING = `${runColumns('r')}, row_to_json((SELECT x FROM (SELECT ${eventColumns('e')}) x)) AS event`;

  const STEPS_OF_LEASED_RUNS_SQL = prepared(
    'stepsOfLeasedRuns',
    `SELECT s.run_id AS "runId", s.name, s.kind, s.result, s.idempotency_key AS "idempotencyKey", s.key_subject AS "keySubject"
       FROM ${STEPS} s JOIN ${RUNS} r ON r.id = s.run_id AND s.generation = r.generation
      WHERE s.run_id = ANY($1::bigint[]) AND r.lease_token = $2::uuid`,
  );
  /**
   * The recorded steps of runs we just leased (token $2), read by a SECOND statement, after the
   * lease statement returned. Why not in the lease statement's RETURNING: the UPDATE that takes
   * an expired lease may have waited on the row lock of the previous owner's step transaction
   * (the fence, FOR NO KEY UPDATE). When that transaction commits, the UPDATE re-checks its
   * WHERE on the newest row version and takes the lease, but a subquery in its RETURNING still
   * reads with the statement's snapshot, taken BEFORE that commit: the step just committed is
   * invisible, and the new owner would run it again (an external call made twice). A new
   * statement (READ COMMITTED: a new snapshot) sees every step committed before our lease was
   * taken, and none can be committed after it: the old owner's fence now fails on the token.
   * Off the hot path: a dispatch creates its runs leased, with no steps to read.
   */
  async function stepsOfLeasedRuns(db: Queryable, rows: (RunRow & { event: EventRow })[], token: string): Promise<LeasedRun[]> {
    if (rows.length === 0) return [];
    const { rows: steps } = await db.query<RecordedStep & { runId: number }>(STEPS_OF_LEASED_RUNS_SQL([rows.map((r) => r.id), token]));
    return rows.map(({ event, ...run }) => ({
      run: run as RunRow,
      event: reviveEvent(event),
      steps: steps.filter((s) => s.runId === run.id).map(({ runId: _runId, ...step }) => step),
    }));
  }

  const ACQUIRE_RUN_SQL = prepared(
    'acquireRun',
    `WITH leased AS (
         UPDATE ${RUNS} r
            SET state = 'processing', lease_token = $3::uuid,
                lease_until = now() + $4::int * interval '1 millisecond',
                attempts = r.attempts + 1, updated_at = now()
           FROM ${EVENTS} e
          WHERE r.event_row_id = $1::bigint AND r.handler = $2::text AND e.id = r.event_row_id
            AND (r.state = 'received' OR (r.state = 'processing' AND r.lease_until < now()))
         RETURNING ${LEASED_RUN_RETURNING}
       ), ${ATTEMPT_LOG}
       SELECT * FROM leased`,
  );
  /**
   * The guarded claim of one run: received -> processing, or take over a processing run whose
   * lease expired. Sets a fresh token (which fences out the previous holder), counts the
   * attempt, and reads the event in the same statement; the run's recorded steps come after,
   * from a statement of their own (stepsOfLeasedRuns says why).
   *
   * null (0 rows) = not ours to run: done or failed, another worker holds a live lease, or the
   * run does not exist. The caller acknowledges the job and does nothing else.
   */
  async function acquireRun(db: Queryable, rowId: number, handler: string, token: string, leaseMs: number): Promise<LeasedRun | null> {
    const { rows } = await db.query<RunRow & { event: EventRow }>(ACQUIRE_RUN_SQL([rowId, handler, token, leaseMs]));
    return (await stepsOfLeasedRuns(db, rows, token))[0] ?? null;
  }

  const ACQUIRE_CLAIMABLE_RUNS_SQL = prepared(
    'acquireClaimableRuns',
    `WITH leased AS (
         UPDATE ${RUNS} r
            SET state = 'processing', lease_token = $2::uuid,
                lease_until = now() + $3::int * interval '1 millisecond',
                attempts = r.attempts + 1, updated_at = now()
           FROM ${EVENTS} e
          WHERE r.event_row_id = $1::bigint AND e.id = r.event_row_id
            AND (r.state = 'received' OR (r.state = 'processing' AND r.lease_until < now()))
         RETURNING ${LEASED_RUN_RETURNING}
       ), ${ATTEMPT_LOG}
       SELECT * FROM leased`,
  );
  /**
   * Every claimable run of an event (received, or a lease that expired), leased to the caller
   * at once: for a dispatch job that finds its event already dispatched (a repeated job, or a
   * run carried over from an older database). Same guard as acquireRun, per run.
   */
  async function acquireClaimableRuns(db: Queryable, rowId: number, token: string, leaseMs: number): Promise<LeasedRun[]> {
    const { rows } = await db.query<RunRow & { event: EventRow }>(ACQUIRE_CLAIMABLE_RUNS_SQL([rowId, token, leaseMs]));
    return stepsOfLeasedRuns(db, rows, token);
  }

  /**
   * A run carried over from before handler names (handler '') takes the name of the one handler
   * now registered for its event type. false = it was bound meanwhile (or no longer exists).
   */
  async function bindLegacyRun(db: Queryable, runId: number, token: string, handler: string): Promise<boolean> {
    const { rowCount } = await db.query(`UPDATE ${RUNS} SET handler = $3::text WHERE id = $1::bigint AND lease_token = $2::uuid AND handler = ''`, [runId, token, handler]);
    return rowCount === 1;
  }

  const RENEW_LEASE_SQL = prepared(
    'renewLease',
    `UPDATE ${RUNS}
          SET lease_until = clock_timestamp() + $3::int * interval '1 millisecond'
        WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
  );
  /**
   * Extends our lease while the handler runs. false (0 rows) = the lease is no longer ours
   * (it expired and was taken over, or the reconciler released it): stop and commit nothing.
   * From clock_timestamp(), not now(): now() is when the statement (or its transaction)
   * started, and a renewal that waited on a lock would write a lease already partly spent.
   */
  async function renewLease(db: Queryable, runId: number, token: string, leaseMs: number): Promise<boolean> {
    const { rowCount } = await db.query(RENEW_LEASE_SQL([runId, token, leaseMs]));
    return rowCount === 1;
  }

  const LOCK_LEASED_RUN_SQL = prepared(
    'lockLeasedRun',
    `SELECT generation FROM ${RUNS}
        WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
        FOR NO KEY UPDATE`,
  );
  /**
   * The fence, taken as the first statement of every step transaction: locks the run row (FOR
   * NO KEY UPDATE, the same lock an UPDATE of it takes) and proves we still hold the lease.
   * While we hold this lock no one can take the lease over; if someone already did, 0 rows:
   * roll back, commit nothing. Returns the generation the steps belong to.
   */
  async function lockLeasedRun(db: Queryable, runId: number, token: string): Promise<{ generation: number } | null> {
    const { rows } = await db.query<{ generation: number }>(LOCK_LEASED_RUN_SQL([runId, token]));
    return rows[0] ?? null;
  }

  /** The event's counters and state after one of its runs finished `done` (CTE `run` returning event_row_id). */
  const EVENT_AFTER_RUN_DONE = `UPDATE ${EVENTS} e
          SET runs_pending = e.runs_pending - 1, state = ${EVENT_STATE_AFTER('-1', '0')},
              finished_at = CASE WHEN e.runs_pending - 1 = 0 THEN now() END, updated_at = now()
         FROM run WHERE e.id = run.event_row_id`;
  const MARK_RUN_DONE_SQL = prepared(
    'markRunDone',
    `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(),
                updated_at = now(), note = coalesce($3::text, note)
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id
       ), ${ATTEMPT_VERDICT('done', 'NULL')}
       ${EVENT_AFTER_RUN_DONE}`,
  );
  /**
   * processing -> done, fenced, and the event's counters and state in the same statement.
   * false (0 rows) = our lease was taken over: another worker owns the run now, and nothing
   * we did may be reported as its outcome.
   */
  async function markRunDone(db: Queryable, runId: number, token: string, note: string | null = null): Promise<boolean> {
    const { rowCount } = await db.query(MARK_RUN_DONE_SQL([runId, token, note]));
    return rowCount === 1;
  }

  const MARK_RUN_FAILED_SQL = prepared(
    'markRunFailed',
    `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'failed', lease_token = NULL, lease_until = NULL, finished_at = now(),
                last_error = $3::text, updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id
       ), ${ATTEMPT_VERDICT('failed', '$3::text')}
       UPDATE ${EVENTS} e
          SET runs_pending = e.runs_pending - 1, runs_failed = e.runs_failed + 1, state = ${EVENT_STATE_AFTER('-1', '1')},
              finished_at = CASE WHEN e.runs_pending - 1 = 0 THEN now() END, updated_at = now()
         FROM run WHERE e.id = run.event_row_id`,
  );
  const RECORD_FINAL_STEP_SQL = prepared(
    'recordFinalStep',
    `WITH step AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result)
         VALUES ($1::bigint, $3::int, $4::text, 'local', $5::jsonb)
         RETURNING run_id
       ), run AS (
         UPDATE ${RUNS}
            SET state = 'done', lease_token = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
          WHERE id = (SELECT run_id FROM step) AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id
       ), ${ATTEMPT_VERDICT('done', 'NULL')}
       ${EVENT_AFTER_RUN_DONE}`,
  );
  /**
   * A `final` local step: its record AND processing -> done (with the event), in one statement
   * inside the step's fenced transaction (recordStep + markRunDone in one round trip). false (0
   * rows) = the lease was lost: the caller throws and the transaction, step record and
   * domain writes included, rolls back.
   */
  async function recordFinalStep(db: Queryable, step: { runId: number; generation: number; name: string; result: unknown }, token: string): Promise<boolean> {
    const { rowCount } = await db.query(RECORD_FINAL_STEP_SQL([step.runId, token, step.generation, step.name, JSON.stringify(step.result ?? null)]));
    return rowCount === 1;
  }

  /** processing -> failed (the dead letter state), fenced, with the event. false = lease lost. */
  async function markRunFailed(db: Queryable, runId: number, token: string, error: string): Promise<boolean> {
    const { rowCount } = await db.query(MARK_RUN_FAILED_SQL([runId, token, error]));
    return rowCount === 1;
  }

  const RELEASE_RUN_FOR_RETRY_SQL = prepared(
    'releaseRunForRetry',
    `WITH run AS (
         UPDATE ${RUNS}
            SET state = 'received', lease_token = NULL, lease_until = NULL,
                last_error = $3::text, updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id
       ), ${ATTEMPT_VERDICT('retry', '$3::text')}
       SELECT id FROM run`,
  );
  /**
   * processing -> received after a retryable error, fenced; the worker enqueues the next
   * attempt after a backoff. The run stays pending, so the event does not change. false (0
   * rows) = lease lost; the new owner decides what happens next.
   */
  async function releaseRunForRetry(db: Queryable, runId: number, token: string, error: string): Promise<boolean> {
    const { rowCount } = await db.query(RELEASE_RUN_FOR_RETRY_SQL([runId, token, error]));
    return rowCount === 1;
  }

  // -------------------------------------------------------------------------------------------
  // Steps (recovery points). Recorded inside a transaction that holds the fence.

  const RECORD_STEP_SQL = prepared(
    'recordStep',
    `INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject)
       VALUES ($1::bigint, $2::int, $3::text, $4::text, $5::jsonb, $6::text, $7::text)`,
  );
  /**
   * Records a completed step. The primary key (run, generation, name) makes a second record of
   * the same step a unique violation: it cannot happen under the fence, and if it ever did,
   * the transaction (with its domain writes) rolls back instead of applying twice.
   */
  async function recordStep(
    db: Queryable,
    step: { runId: number; generation: number; name: string; kind: StepKind; result: unknown; idempotencyKey: string | null; keySubject?: string | null },
  ): Promise<void> {
    await db.query(RECORD_STEP_SQL([step.runId, step.generation, step.name, step.kind, JSON.stringify(step.result ?? null), step.idempotencyKey, step.keySubject ?? null]));
  }

  // -------------------------------------------------------------------------------------------
  // Per-object ordering and locks (the SDK's ctx.ordered and ctx.lock), inside a local step.

  /**
   * Serialises local steps about one object: a transaction-scoped advisory lock on a key hashed
   * from the schema and the object key (lock-keys.ts); released by the step's COMMIT/ROLLBACK.
   */
  async function lockObject(tx: Queryable, objectKey: string): Promise<void> {
    await tx.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryLockKey(schemaName, 'object', objectKey)]);
  }

  /**
   * Records `version` as the highest applied for (handler, object) unless a higher one is
   * already recorded, and returns what was recorded before. One upsert, and every value it
   * returns is read under its row lock: ON CONFLICT DO UPDATE locks the row (waiting for a step
   * that holds it uncommitted) and evaluates its SET on the newest committed version, so two
   * steps racing for one object cannot both win, and each sees the other's version. The row is
   * always written (greatest of the two; `previous_version` = what it held), because RETURNING
   * sees only the new row: a stale call costs a row version, and is rare. Equal versions are not
   * stale (a replay of the same update applies). `previous` null: the first update of this object.
   */
  async function recordObjectVersion(tx: Queryable, handler: string, objectKey: string, version: number): Promise<{ stale: boolean; previous: number | null }> {
    const { rows } = await tx.query<{ previous: string | null }>(
      `INSERT INTO ${VERSIONS} AS v (handler, object_key, version) VALUES ($1::text, $2::text, $3::numeric)
       ON CONFLICT (handler, object_key) DO UPDATE
          SET version = greatest(v.version, excluded.version), previous_version = v.version,
              updated_at = CASE WHEN v.version <= excluded.version THEN now() ELSE v.updated_at END
       RETURNING previous_version::text AS previous`,
      [handler, objectKey, version],
    );
    const previous = rows[0]!.previous === null ? null : Number(rows[0]!.previous);
    return { stale: previous !== null && previous > version, previous };
  }

  // -------------------------------------------------------------------------------------------
  // The reconciler.

  /** SQL of releaseExpiredLeases ($1 limit); exported so tests can EXPLAIN it. */
  const EXPIRED_LEASES_SQL = `UPDATE ${RUNS} r
        SET state = 'received', lease_token = NULL, lease_until = NULL, updated_at = now(),
            last_error = 'lease expired during attempt ' || r.attempts || ' (worker crashed or hung)'
       FROM ${EVENTS} e
      WHERE r.id = ANY(ARRAY(
        SELECT id FROM ${RUNS}
         WHERE state = 'processing' AND lease_until < now()
         ORDER BY lease_until
         LIMIT $1::int
         FOR UPDATE SKIP LOCKED))
        AND r.state = 'processing' AND r.lease_until < now() AND e.id = r.event_row_id
      RETURNING r.event_row_id AS "rowId", e.provider, e.event_id AS "eventId", r.handler, r.generation, r.attempts AS attempt`;

  /**
   * processing -> received for runs whose lease expired: the worker died or hung. Clearing the
   * token fences the old holder out; the caller enqueues each run's next attempt. The attempt
   * the dead worker started stays counted, so a run that kills its worker every time still
   * reaches `failed`. SKIP LOCKED: never wait behind a worker's step.
   */
  async function releaseExpiredLeases(db: Queryable, limit: number): Promise<EventJobData[]> {
    const { rows } = await db.query<EventJobData>(EXPIRED_LEASES_SQL, [limit]);
    return rows;
  }

  /** SQL of takeStaleReceivedRuns ($1 olderThanMs, $2 limit); exported so tests can EXPLAIN it. */
  const STALE_RUNS_SQL = `UPDATE ${RUNS} r SET updated_at = now()
       FROM ${EVENTS} e
      WHERE r.id = ANY(ARRAY(
        SELECT id FROM ${RUNS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
         ORDER BY updated_at
         LIMIT $2::int
         FOR UPDATE SKIP LOCKED))
        AND r.state = 'received' AND e.id = r.event_row_id
      RETURNING r.event_row_id AS "rowId", e.provider, e.event_id AS "eventId", r.handler, r.generation, r.attempts AS attempt`;

  /**
   * `received` runs untouched for `olderThanMs`: their job was lost (Redis flushed or failed
   * over) or sits behind a backlog. Touches updated_at on the runs it returns, so the same run
   * is re-enqueued at most once per `olderThanMs`.
   */
  async function takeStaleReceivedRuns(db: Queryable, olderThanMs: number, limit: number): Promise<EventJobData[]> {
    const { rows } = await db.query<EventJobData>(STALE_RUNS_SQL, [olderThanMs, limit]);
    return rows;
  }

  /** SQL of takeStaleReceivedEvents ($1 olderThanMs, $2 limit). */
  const STALE_EVENTS_SQL = `UPDATE ${EVENTS} SET updated_at = now()
      WHERE id = ANY(ARRAY(
        SELECT id FROM ${EVENTS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'
         ORDER BY updated_at
         LIMIT $2::int
         FOR UPDATE SKIP LOCKED))
        AND state = 'received'
      RETURNING id AS "rowId", provider, event_id AS "eventId", kind, type, 0 AS attempt`;

  /**
   * Events claimed but never dispatched (ingest died between commit and enqueue, Redis lost the
   * job) and untouched for `olderThanMs`; touched, so each is re-enqueued once per threshold.
   */
  async function takeStaleReceivedEvents(db: Queryable, olderThanMs: number, limit: number): Promise<EventJobData[]> {
    const { rows } = await db.query<EventJobData>(STALE_EVENTS_SQL, [olderThanMs, limit]);
    return rows;
  }

  // -------------------------------------------------------------------------------------------
  // Operator actions. Guarded UPDATEs that never touch a run a worker holds a live lease on:
  // 0 rows = not in a state the action applies to (or leased).

  /**
   * Re-drive: finish what was started, with the SAME generation (same outbound keys,
   * committed steps skipped). Applies to runs that are `failed`, `received`, or `processing`
   * with an expired lease; `handler` null = every such run of the event. Attempts restart from
   * 0. An event never dispatched is left to the caller (it enqueues the dispatch).
   */
  async function redriveRuns(db: Queryable, rowId: number, handler: string | null, actor: string, reason: string): Promise<MovedRun[]> {
    const { rows } = await db.query<{ runId: number; handler: string; fromState: RunState; generation: number; provider: string; eventId: string }>(
      `WITH target AS (
         SELECT id, state FROM ${RUNS}
          WHERE event_row_id = $1::bigint AND ($2::text IS NULL OR handler = $2::text)
            AND (state IN ('failed', 'received') OR (state = 'processing' AND lease_until < now()))
          FOR UPDATE
       ), moved AS (
         UPDATE ${RUNS} r
            SET state = 'received', attempts = 0, lease_token = NULL, lease_until = NULL,
                finished_at = NULL, updated_at = now()
           FROM target t WHERE r.id = t.id
         RETURNING r.id, r.handler, r.generation, t.state AS from_state
       ), event AS (
         UPDATE ${EVENTS} e
            SET runs_pending = e.runs_pending + x.failed, runs_failed = e.runs_failed - x.failed,
                state = 'processing', finished_at = NULL, updated_at = now()
           FROM (SELECT count(*) FILTER (WHERE from_state = 'failed')::int AS failed FROM moved) x
          WHERE e.id = $1::bigint AND EXISTS (SELECT 1 FROM moved)
         RETURNING e.provider, e.event_id
       ), audit AS (
         INSERT INTO ${ACTIONS} (event_row_id, run_id, mode, from_state, generation, actor, reason)
         SELECT $1::bigint, id, 'redrive', from_state, generation, $3::text, $4::text FROM moved
       )
       SELECT m.id AS "runId", m.handler, m.from_state AS "fromState", m.generation, ev.provider, ev.event_id AS "eventId"
         FROM moved m, event ev`,
      [rowId, handler, actor, reason],
    );
    return rows.map((row) => ({
      runId: row.runId,
      handler: row.handler,
      fromState: row.fromState,
      generation: row.generation,
      job: { rowId, provider: row.provider, eventId: row.eventId, handler: row.handler, generation: row.generation, attempt: 0 },
    }));
  }

  /**
   * Replay: do it again on purpose, as a NEW generation of one run (`done` or `failed`, never in
   * flight). The steps in `reuse` are copied into the new generation with their recorded
   * results (the handler gets them back without re-running them); every other step runs
   * again, and an external one gets a new idempotency key (the key includes the generation).
   * null (0 rows) = the run is not finished (or does not exist).
   */
  async function replayRun(db: Queryable, input: { rowId: number; handler: string; reuse: string[]; actor: string; reason: string; detail: unknown }): Promise<MovedRun | null> {
    const { rows } = await db.query<{ runId: number; handler: string; fromState: RunState; generation: number; provider: string; eventId: string }>(
      `WITH target AS (
         SELECT id, state, generation FROM ${RUNS}
          WHERE event_row_id = $1::bigint AND handler = $2::text AND state IN ('done', 'failed')
          FOR UPDATE
       ), moved AS (
         UPDATE ${RUNS} r
            SET state = 'received', generation = r.generation + 1, attempts = 0, last_error = NULL,
                note = NULL, finished_at = NULL, updated_at = now()
           FROM target t WHERE r.id = t.id
         RETURNING r.id, r.handler, r.generation, t.state AS from_state, t.generation AS previous
       ), reused AS (
         INSERT INTO ${STEPS} (run_id, generation, name, kind, result, idempotency_key, key_subject, reused_from, completed_at)
         SELECT m.id, m.generation, s.name, s.kind, s.result, s.idempotency_key, s.key_subject, s.generation, s.completed_at
           FROM moved m JOIN ${STEPS} s ON s.run_id = m.id AND s.generation = m.previous
          WHERE s.name = ANY($3::text[])
       ), event AS (
         UPDATE ${EVENTS} e
            SET runs_pending = e.runs_pending + 1,
                runs_failed = e.runs_failed - (SELECT count(*) FROM moved WHERE from_state = 'failed')::int,
                state = 'processing', finished_at = NULL, updated_at = now()
          WHERE e.id = $1::bigint AND EXISTS (SELECT 1 FROM moved)
         RETURNING e.provider, e.event_id
       ), audit AS (
         INSERT INTO ${ACTIONS} (event_row_id, run_id, mode, from_state, generation, actor, reason, detail)
         SELECT $1::bigint, id, 'replay', from_state, generation, $4::text, $5::text, $6::jsonb FROM moved
       )
       SELECT m.id AS "runId", m.handler, m.from_state AS "fromState", m.generation, ev.provider, ev.event_id AS "eventId"
         FROM moved m, event ev`,
      [input.rowId, input.handler, input.reuse, input.actor, input.reason, JSON.stringify(input.detail)],
    );
    const row = rows[0];
    if (!row) return null;
    return {
      runId: row.runId,
      handler: row.handler,
      fromState: row.fromState,
      generation: row.generation,
      job: { rowId: input.rowId, provider: row.provider, eventId: row.eventId, handler: row.handler, generation: row.generation, attempt: 0 },
    };
  }

  // -------------------------------------------------------------------------------------------
  // Reads for operators.

  /** Deliveries of event `e`: its first (logged) and every duplicate (counted). */
  const DELIVERY_TOTAL = `((SELECT count(*) FROM ${DELIVERIES} d WHERE d.event_row_id = e.id AND NOT d.duplicate)
      + coalesce((SELECT dc.duplicates FROM ${DELIVERY_COUNTS} dc WHERE dc.event_row_id = e.id), 0))::int`;
  const DELIVERY_COUNT = `${DELIVERY_TOTAL} AS deliveries`;
  const RUNS_SUMMARY = `(SELECT coalesce(json_agg(json_build_object('id', r.id, 'handler', r.handler, 'state', r.state, 'attempts', r.attempts,
        'generation', r.generation, 'lastError', r.last_error, 'updatedAt', r.updated_at) ORDER BY r.handler), '[]')
      FROM ${RUNS} r WHERE r.event_row_id = e.id) AS runs`;

  async function listEvents(db: Queryable, filter: EventFilter): Promise<EventSummary[]> {
    const { rows } = await db.query<EventSummary & { runs: (RunSummary & { updatedAt: string })[] }>(
      `SELECT e.id, e.provider, e.event_id AS "eventId", e.type, e.state, e.note,
              e.received_at AS "receivedAt", e.updated_at AS "updatedAt", ${RUNS_SUMMARY}, ${DELIVERY_COUNT}
         FROM ${EVENTS} e
        WHERE ($1::text IS NULL OR e.state = $1::text)
          AND ($2::text IS NULL OR e.provider = $2::text)
          AND ($3::text IS NULL OR e.type = $3::text)
          AND ($4::int IS NULL OR e.received_at < now() - $4::int * interval '1 second')
          AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM ${RUNS} r WHERE r.event_row_id = e.id AND r.handler = $5::text))
        ORDER BY e.updated_at DESC
        LIMIT $6::int`,
      [filter.state ?? null, filter.provider ?? null, filter.type ?? null, filter.olderThanSeconds ?? null, filter.handler ?? null, filter.limit ?? 50],
    );
    return rows.map((row) => ({ ...row, runs: row.runs.map((r) => ({ ...r, updatedAt: new Date(r.updatedAt) })) }));
  }

  /** Runs that look stuck: processing past their lease, or received untouched for `receivedOlderThanMs`. */
  async function listStuckRuns(db: Queryable, receivedOlderThanMs: number, limit: number): Promise<EventSummary[]> {
    const { rows } = await db.query<{ id: number }>(
      `SELECT DISTINCT r.event_row_id AS id FROM ${RUNS} r
        WHERE (r.state = 'processing' AND r.lease_until < now())
           OR (r.state = 'received' AND r.updated_at < now() - $1::int * interval '1 millisecond')
        LIMIT $2::int`,
      [receivedOlderThanMs, limit],
    );
    if (rows.length === 0) return [];
    const { rows: events } = await db.query<EventSummary & { runs: (RunSummary & { updatedAt: string })[] }>(
      `SELECT e.id, e.provider, e.event_id AS "eventId", e.type, e.state, e.note,
              e.received_at AS "receivedAt", e.updated_at AS "updatedAt", ${RUNS_SUMMARY}, ${DELIVERY_COUNT}
         FROM ${EVENTS} e WHERE e.id = ANY($1::bigint[]) ORDER BY e.updated_at`,
      [rows.map((r) => r.id)],
    );
    return events.map((row) => ({ ...row, runs: row.runs.map((r) => ({ ...r, updatedAt: new Date(r.updatedAt) })) }));
  }

  async function showEvent(db: Queryable, rowId: number): Promise<EventDetail | null> {
    const event = await getEvent(db, rowId);
    if (!event) return null;
    const runs = await db.query<RunRow>(`SELECT ${runColumns('r')} FROM ${RUNS} r WHERE r.event_row_id = $1::bigint ORDER BY r.handler`, [rowId]);
    const steps = await db.query<StepRecord>(
      `SELECT s.run_id AS "runId", r.handler, s.generation, s.name, s.kind, s.result, s.idempotency_key AS "idempotencyKey",
              s.reused_from AS "reusedFrom", s.completed_at AS "completedAt"
         FROM ${STEPS} s JOIN ${RUNS} r ON r.id = s.run_id
        WHERE r.event_row_id = $1::bigint ORDER BY s.completed_at, s.generation`,
      [rowId],
    );
    const actions = await db.query<OperatorAction>(
      `SELECT a.run_id AS "runId", r.handler, a.mode, a.from_state AS "fromState", a.generation, a.actor, a.reason, a.detail, a.created_at AS "createdAt"
         FROM ${ACTIONS} a LEFT JOIN ${RUNS} r ON r.id = a.run_id
        WHERE a.event_row_id = $1::bigint ORDER BY a.created_at`,
      [rowId],
    );
    const deliveries = await db.query<DeliveryRecord>(
      `SELECT received_at AS "receivedAt", duplicate, same_body AS "sameBody"
         FROM ${DELIVERIES} WHERE event_row_id = $1::bigint ORDER BY received_at LIMIT ${DELIVERY_LOG_ROWS}`,
      [rowId],
    );
    const counted = await db.query<{ total: number; lastAt: Date | null }>(
      `SELECT ${DELIVERY_TOTAL} AS total, (SELECT dc.last_at FROM ${DELIVERY_COUNTS} dc WHERE dc.event_row_id = e.id) AS "lastAt"
         FROM ${EVENTS} e WHERE e.id = $1::bigint`,
      [rowId],
    );
    const attempts = await db.query<AttemptRecord>(
      `SELECT a.run_id AS "runId", r.handler, a.generation, a.attempt, a.started_at AS "startedAt", a.ended_at AS "endedAt", a.outcome, a.error
         FROM ${ATTEMPTS} a JOIN ${RUNS} r ON r.id = a.run_id
        WHERE r.event_row_id = $1::bigint ORDER BY a.started_at, a.attempt`,
      [rowId],
    );
    return {
      event,
      runs: runs.rows,
      steps: steps.rows,
      operatorActions: actions.rows,
      deliveryCount: counted.rows[0]?.total ?? 0,
      deliveries: deliveries.rows,
      lastDeliveryAt: counted.rows[0]?.lastAt ?? deliveries.rows[deliveries.rows.length - 1]?.receivedAt ?? null,
      attempts: attempts.rows,
    };
  }

  const GET_EVENT_SQL = prepared('getEvent', `SELECT ${eventColumns('e')} FROM ${EVENTS} e WHERE e.id = $1::bigint`);
  async function getEvent(db: Queryable, rowId: number): Promise<EventRow | null> {
    const { rows } = await db.query<EventRow>(GET_EVENT_SQL([rowId]));
    return rows[0] ?? null;
  }

  async function getEventByKey(db: Queryable, provider: string, eventId: string): Promise<EventRow | null> {
    const { rows } = await db.query<EventRow>(`SELECT ${eventColumns('e')} FROM ${EVENTS} e WHERE e.provider = $1::text AND e.event_id = $2::text`, [provider, eventId]);
    return rows[0] ?? null;
  }

  async function getRuns(db: Queryable, rowId: number): Promise<RunRow[]> {
    const { rows } = await db.query<RunRow>(`SELECT ${runColumns('r')} FROM ${RUNS} r WHERE r.event_row_id = $1::bigint ORDER BY r.handler`, [rowId]);
    return rows;
  }

  /** Steps of one run and generation, in the order they completed. */
  async function getSteps(db: Queryable, runId: number, generation: number): Promise<RecordedStep[]> {
    const { rows } = await db.query<RecordedStep>(
      `SELECT name, kind, result, idempotency_key AS "idempotencyKey", key_subject AS "keySubject" FROM ${STEPS}
        WHERE run_id = $1::bigint AND generation = $2::int ORDER BY completed_at, name`,
      [runId, generation],
    );
    return rows;
  }

  // -------------------------------------------------------------------------------------------
  // Gauges. Each count is answered from a partial index, so the cost does not grow with the
  // number of done events.

  async function pendingCounts(db: Queryable, staleAfterMs: number): Promise<PendingCounts> {
    const { rows } = await db.query<PendingCounts>(
      `SELECT
         (SELECT count(*) FROM ${EVENTS} WHERE state = 'received')::int AS "eventsReceived",
         (SELECT count(*) FROM ${EVENTS} WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond')::int AS "eventsReceivedStale",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'received')::int AS "runsReceived",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond')::int AS "runsReceivedStale",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'processing')::int AS "runsProcessing",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'processing' AND lease_until < now())::int AS "runsProcessingExpired",
         (SELECT count(*) FROM ${RUNS} WHERE state = 'failed')::int AS "runsFailed"`,
      [staleAfterMs],
    );
    return rows[0]!;
  }

  // -------------------------------------------------------------------------------------------
  // Retention.

  /** The providers present, by a loose index scan of (provider, received_at): one probe each. */
  async function distinctProviders(db: Queryable): Promise<string[]> {
    const { rows } = await db.query<{ provider: string }>(
      `WITH RECURSIVE p AS (
         (SELECT provider FROM ${EVENTS} ORDER BY provider LIMIT 1)
         UNION ALL
         SELECT (SELECT provider FROM ${EVENTS} WHERE provider > p.provider ORDER BY provider LIMIT 1)
           FROM p WHERE p.provider IS NOT NULL
       )
       SELECT provider FROM p WHERE provider IS NOT NULL`,
    );
    return rows.map((row) => row.provider);
  }

  /**
   * SQL of deleteExpiredBatch ($1 provider, $2 days, $3 limit); exported so tests can EXPLAIN it.
   * `id = ANY(ARRAY(subquery))`, not `id IN (subquery)`: the planner then touches the batch's
   * rows by primary key instead of hash-joining it against a scan of the whole table.
   */
  const RETENTION_DELETE_SQL = `DELETE FROM ${EVENTS}
      WHERE id = ANY(ARRAY(
        SELECT id FROM ${EVENTS}
         WHERE provider = $1::text AND state = 'done'
           AND received_at < now() - $2::int * interval '1 day'
         ORDER BY received_at
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED))`;

  /**
   * SQL of pruneExpiredBatch ($1 provider, $2 days, $3 limit); exported so tests can EXPLAIN it.
   * One statement: the batch (one source's oldest done events with a payload, past the payload
   * horizon; SKIP LOCKED) loses its runs (steps, attempts and operator actions cascade) and its
   * delivery log and counts, and the event row keeps only its key, type, state and times.
   */
  const RETENTION_PRUNE_SQL = `WITH batch AS (
        SELECT id FROM ${EVENTS}
         WHERE provider = $1::text AND state = 'done' AND pruned_at IS NULL
           AND received_at < now() - $2::int * interval '1 day'
         ORDER BY received_at
         LIMIT $3::int
         FOR UPDATE SKIP LOCKED
      ), runs_gone AS (
        DELETE FROM ${RUNS} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      ), deliveries_gone AS (
        DELETE FROM ${DELIVERIES} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      ), counts_gone AS (
        DELETE FROM ${DELIVERY_COUNTS} WHERE event_row_id = ANY(ARRAY(SELECT id FROM batch))
      )
      UPDATE ${EVENTS} SET payload = NULL, meta = '{}', note = NULL, pruned_at = now()
       WHERE id = ANY(ARRAY(SELECT id FROM batch))`;

  /** Prunes one batch past the payload horizon (RETENTION_PRUNE_SQL); returns how many. */
  async function pruneExpiredBatch(db: Queryable, provider: string, days: number, limit: number): Promise<number> {
    const { rowCount } = await db.query(RETENTION_PRUNE_SQL, [provider, days, limit]);
    return rowCount ?? 0;
  }

  /**
   * Deletes one batch of one provider's done events received more than `days` ago, oldest first
   * (index events_done_retention_idx; runs, steps and operator actions cascade). Failed events
   * are never deleted: they are dead letters waiting for a human. Returns the number deleted
   * (< limit means the provider is caught up).
   */
  async function deleteExpiredBatch(db: Queryable, provider: string, days: number, limit: number): Promise<number> {
    const { rowCount } = await db.query(RETENTION_DELETE_SQL, [provider, days, limit]);
    return rowCount ?? 0;
  }

  // -------------------------------------------------------------------------------------------
  // The handlers workers run (for ingest's labels and the admin).

  /** Upserts what a worker loaded, at its start. */
  async function registerHandlers(
    db: Queryable,
    handlers: { name: string; source: string; kind: string | undefined; type: string; description: string | undefined }[],
  ): Promise<void> {
    if (handlers.length === 0) return;
    await db.query(
      `INSERT INTO ${S}.handlers (name, source, kind, type, description)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
       ON CONFLICT (name) DO UPDATE
          SET source = excluded.source, kind = excluded.kind, type = excluded.type,
              description = excluded.description, last_seen_at = now()`,
      [handlers.map((h) => h.name), handlers.map((h) => h.source), handlers.map((h) => h.kind ?? null), handlers.map((h) => h.type), handlers.map((h) => h.description ?? null)],
    );
  }

  async function listHandlers(db: Queryable): Promise<{ name: string; source: string; kind: string | null; type: string; lastSeenAt: Date }[]> {
    const { rows } = await db.query<{ name: string; source: string; kind: string | null; type: string; lastSeenAt: Date }>(
      `SELECT name, source, kind, type, last_seen_at AS "lastSeenAt" FROM ${S}.handlers ORDER BY name`,
    );
    return rows;
  }

  return {
    schema: S,
    registerHandlers,
    listHandlers,
    claimEvent,
    claimEvents,
    logDeliveries,
    dispatchAndLease,
    finishUnhandled,
    acquireRun,
    acquireClaimableRuns,
    bindLegacyRun,
    renewLease,
    lockLeasedRun,
    lockObject,
    recordObjectVersion,
    recordFinalStep,
    markRunDone,
    markRunFailed,
    releaseRunForRetry,
    recordStep,
    EXPIRED_LEASES_SQL,
    releaseExpiredLeases,
    STALE_RUNS_SQL,
    takeStaleReceivedRuns,
    STALE_EVENTS_SQL,
    takeStaleReceivedEvents,
    redriveRuns,
    replayRun,
    listEvents,
    listStuckRuns,
    showEvent,
    getEvent,
    getEventByKey,
    getRuns,
    getSteps,
    pendingCounts,
    distinctProviders,
    RETENTION_DELETE_SQL,
    deleteExpiredBatch,
    pruneExpiredBatch,
    RETENTION_PRUNE_SQL,
  };
}

export type Queries = ReturnType<typeof createQueries>;

// json_agg / row_to_json hand back timestamps as strings: revive them.
const dateOrNull = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(value as string));

function reviveEvent(raw: EventRow): EventRow {
  return {
    ...raw,
    signedAt: dateOrNull(raw.signedAt),
    receivedAt: new Date(raw.receivedAt),
    updatedAt: new Date(raw.updatedAt),
    finishedAt: dateOrNull(raw.finishedAt),
    prunedAt: dateOrNull(raw.prunedAt),
  };
}

function reviveRun(raw: RunRow): RunRow {
  return {
    ...raw,
    leaseUntil: dateOrNull(raw.leaseUntil),
    createdAt: new Date(raw.createdAt),
    updatedAt: new Date(raw.updatedAt),
    finishedAt: dateOrNull(raw.finishedAt),
  };
}
