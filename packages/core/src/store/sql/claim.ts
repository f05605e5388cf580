/**
 * The edge's statements: the claim (one delivery, or a batch: ingest's group commit) and the
 * delivery log that rides in its statement. Plain text built from the table names; execution
 * is in ../claim.ts.
 */
import type { Tables } from '../tables.js';

/**
 * Stripes of a source's body hashes for the batched claim's lock order (CLAIM_EVENTS). 16: a
 * batch of 200 body-deduplicated deliveries takes 16 locks, not 200, and two small batches
 * of one source (2-5 deliveries each, the common case under moderate load) rarely share one.
 */
export const CLAIM_BODY_STRIPES = 16;

/**
 * Deliveries of one event the delivery log keeps in full (the first, and the 99 duplicates
 * after it); past them, every duplicate is counted (delivery_counts: how many, and when the
 * last came; migrations/0020).
 * Enough for any timeline a person reads (a provider's retry schedule is under 30 deliveries),
 * and a bound on what a replayed capture can add for one event: 100 rows, not one per replay.
 */
export const DELIVERY_LOG_ROWS = 100;

export function claimStatements(t: Tables) {
  const { EVENTS, DELIVERIES, SCHEMA } = t;

  /**
   * The delivery log, as CTEs that follow a claim in its own statement. `source` is a relation
   * with one row per input of the statement: (id: the event row, ord: its place in the input,
   * inserted: this input created the event, same_body, copies: deliveries of it folded into the
   * input). A delivery gets a row of its own while its event has fewer than DELIVERY_LOG_ROWS;
   * past them its duplicates are counted (delivery_counts; migrations/0020 says why the counter
   * is not written before). Each event with duplicates here has its log counted, and its counter
   * kept up, under its log's lock (delivery_log_count: snapshots taken after the lock, in event
   * id order, so two statements wait for each other, never deadlock, and neither counts without
   * the other's rows): the bound holds under any concurrency.
   */
  // mutant: delivery-log-unbounded
  const DELIVERY_LOG = (source: string) => `log_in AS (
         ${source}
       ), log_dups AS (
         SELECT id, sum(copies - inserted::int)::int AS n FROM log_in GROUP BY id
       ), log_before AS (
         -- Each event's deliveries before this statement's, counted (and its counter kept up)
         -- under its log's lock, in event id order (migrations/0020, delivery_log_count).
         SELECT d.id, ${SCHEMA}.delivery_log_count(d.id, d.n, ${DELIVERY_LOG_ROWS}) AS before
           FROM (SELECT id, n FROM log_dups WHERE n > 0 ORDER BY id) d
       ), log_rows AS (
         -- Deliveries of the event before each input's duplicates: those before this
         -- statement, and this statement's earlier inputs.
         SELECT l.id, l.inserted, l.same_body, l.copies - l.inserted::int AS dups,
                coalesce(b.before, 1)
                  + coalesce(sum(l.copies - l.inserted::int) OVER (PARTITION BY l.id ORDER BY l.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
           FROM log_in l LEFT JOIN log_before b ON b.id = l.id
       ), logged AS (
         INSERT INTO ${DELIVERIES} (event_row_id, duplicate, same_body)
         SELECT id, false, false FROM log_rows WHERE inserted
         UNION ALL
         SELECT id, true, same_body FROM log_rows CROSS JOIN generate_series(1, greatest(0, least(dups, ${DELIVERY_LOG_ROWS} - before)::int))
       )`;

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

  return {
    /**
     * The claim of one delivery, in one round trip for both outcomes ($1 provider, $2 kind, $3
     * event id, $4 type, $5 payload text, $6 signed at, $7 meta, $8 body hash; with `origin`, the
     * event was fetched by a backfill, $9 which one: recorded as its origin when it is new).
     * `INSERT ... ON CONFLICT DO NOTHING RETURNING` returns a row only for the delivery that
     * created it; without a conflict target it stops at either unique key: (provider, event_id),
     * or (provider, body_hash) for sources that deduplicate on the body. If another transaction
     * holds an uncommitted insert of the same key, Postgres waits for it: on its commit we do
     * nothing (duplicate), on its abort we insert. The UNION branch reads the existing row for
     * the duplicate answer, in the same statement snapshot, so it sees nothing if the winner
     * committed after we started (0 rows: a concurrent duplicate). The payload goes to Postgres
     * as the verified raw text and is cast to jsonb there.
     */
    // mutant: claim-single-check-then-act, backfill-origin-not-recorded
    CLAIM_EVENT: (logDeliveries: boolean, origin = false) => `WITH inserted AS (
         INSERT INTO ${EVENTS} (provider, kind, event_id, type, payload, signed_at, meta, body_hash, payload_bytes${origin ? ', origin, origin_detail' : ''})
         VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb, $8::bytea, octet_length($5::text)${origin ? ", 'backfill', $9::text" : ''})
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
         logDeliveries === false ? '' : `, ${DELIVERY_LOG('SELECT id, 1 AS ord, inserted, "sameBody" AS same_body, 1 AS copies FROM result')}`
       }
       SELECT * FROM result`,

    /**
     * The claim of a batch ($1-$9 arrays: provider, kind, event id, type, payload, signed at,
     * meta, body hash, copies; $10 the body stripes' lock keys), in ONE round trip. Same
     * semantics as CLAIM_EVENT, per event; one row per input that found or made its event (its
     * `ord`); a missing `ord` is a concurrent duplicate.
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
     * A single-row claim (CLAIM_EVENT) needs neither: it holds no key while it waits.
     *
     * With `queueTable` (QUEUE_BACKEND=postgres: insert on claim, postgres-queue.ts ClaimJobs),
     * the statement also inserts each new event's dispatch job into the queue's table ($11-$13
     * arrays by input position: job id, queue, data without the row id; $14 the enqueue clock,
     * $15 the notification channel), and notifies each queue that got one, delivered at this
     * statement's commit: the events and their jobs commit together, or neither does. A job id
     * that waits already is left as it is, as an enqueue leaves it.
     */
    // mutant: claim-check-then-act, claim-keys-unordered, claim-body-stripes-off
    // mutant: claim-same-body-in-batch-unmatched
    CLAIM_EVENTS: (logDeliveries: boolean, queueTable?: string) => `WITH input AS (
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
               logDeliveries === false ? '' : `, ${DELIVERY_LOG('SELECT r.id, r.ord, r.inserted, r."sameBody" AS same_body, i.copies FROM result r JOIN input i ON i.ord = r.ord')}`
             }${
               // mutant: claim-outbox-off
               queueTable === undefined
                 ? `
             SELECT * FROM result`
                 : `, queued AS (
               INSERT INTO ${queueTable} (id, queue, data, priority, ord, run_at)
               SELECT j.id, j.queue, j.data || jsonb_build_object('rowId', r.id), 0, $14::bigint + j.ord, now()
                 FROM result r JOIN unnest($11::text[], $12::text[], $13::jsonb[]) WITH ORDINALITY AS j(id, queue, data, ord) ON j.ord = r.ord
                WHERE r.inserted
               ON CONFLICT (id) DO NOTHING
               RETURNING queue
             ), notified AS (
               -- Read by the final SELECT, so it runs (a plain CTE nothing reads does not); one
               -- row whatever it notified.
               SELECT count(pg_notify($15::text, q)) AS n FROM (SELECT DISTINCT queue AS q FROM queued) s
             )
             SELECT result.* FROM result CROSS JOIN notified`
             }`,

    /**
     * Delivery-log rows for duplicates whose event the claim could not see (committed after its
     * snapshot), looked up now that it is committed, by id, else by body ($1-$4 arrays:
     * provider, event id, body hash, copies).
     */
    LOG_DELIVERIES: `WITH ${DELIVERY_LOG(`SELECT e.id, k.ord, false AS inserted, e.event_id <> k.event_id AS same_body, k.copies
           FROM unnest($1::text[], $2::text[], $3::bytea[], $4::int[]) WITH ORDINALITY AS k(provider, event_id, body_hash, copies, ord)
           CROSS JOIN LATERAL (${MATCH_EXISTING('k.provider', 'k.event_id', 'k.body_hash')}) e`)}
       SELECT 1`,
  };
}
