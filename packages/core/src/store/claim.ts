/**
 * Execution of the edge's statements (sql/claim.ts): the claim of one delivery or a batch, and
 * the late delivery log of concurrent duplicates.
 */
import type { Pool, VerifiedEvent } from '@oncehook/shared';
import { advisoryLockKey } from '../lock-keys.js';
import type { EventState } from '../vocabulary.js';
import { readTimeout, type ClaimOptions, type ClaimResult, type Queryable } from './rows.js';
import { CLAIM_BODY_STRIPES, claimStatements } from './sql/claim.js';
import type { Tables } from './tables.js';
import type { ClaimJobs } from '../postgres-queue.js';

type ClaimRow = { id: number; inserted: boolean; state: EventState; updatedAt: Date; type: string; sameBody: boolean };

function claimResult(row: ClaimRow | undefined): ClaimResult {
  if (!row) return { outcome: 'duplicate-concurrent' };
  if (row.inserted) return { outcome: 'new', rowId: row.id };
  return { outcome: 'duplicate', rowId: row.id, state: row.state, updatedAt: row.updatedAt, type: row.type, sameBody: row.sameBody };
}

export function createClaimQueries(t: Tables, schemaName: string) {
  const sql = claimStatements(t);
  const CLAIM_EVENT = { logged: sql.CLAIM_EVENT(true), unlogged: sql.CLAIM_EVENT(false), backfill: sql.CLAIM_EVENT(false, true) };
  const CLAIM_EVENTS = { logged: sql.CLAIM_EVENTS(true), unlogged: sql.CLAIM_EVENTS(false) };
  /** The texts that also insert the jobs (insert on claim), by queue table: one process has one. */
  const withJobs = new Map<string, { logged: string; unlogged: string }>();
  function claimEventsText(logDeliveries: boolean, jobs: ClaimJobs | undefined): string {
    if (!jobs) return logDeliveries ? CLAIM_EVENTS.logged : CLAIM_EVENTS.unlogged;
    let texts = withJobs.get(jobs.table);
    if (!texts) {
      texts = { logged: sql.CLAIM_EVENTS(true, jobs.table), unlogged: sql.CLAIM_EVENTS(false, jobs.table) };
      withJobs.set(jobs.table, texts);
    }
    return logDeliveries ? texts.logged : texts.unlogged;
  }

  /** Advisory lock key of each (source, stripe), computed once. */
  const stripeKeys = new Map<string, string[]>();
  /** The distinct body stripes a batch touches, as lock keys (CLAIM_EVENTS sorts them in SQL). */
  function bodyStripeKeys(events: VerifiedEvent[]): string[] {
    const keys = new Set<string>();
    for (const event of events) {
      if (!event.bodyHash || event.bodyHash.length === 0) continue;
      let perSource = stripeKeys.get(event.source);
      if (!perSource) {
        perSource = Array.from({ length: CLAIM_BODY_STRIPES }, (_v, i) => advisoryLockKey(schemaName, 'claim-body', `${event.source}\0${i}`));
        stripeKeys.set(event.source, perSource);
      }
      keys.add(perSource[event.bodyHash[0]! % CLAIM_BODY_STRIPES]!);
    }
    return [...keys];
  }

  /**
   * The claim of one delivery (sql CLAIM_EVENT): `new` for the delivery that created the row,
   * `duplicate` with the stored row's state, or `duplicate-concurrent` (the winner committed
   * after our snapshot: durable, and fresh).
   */
  async function claimEvent(db: Pool, event: VerifiedEvent, options: ClaimOptions = {}): Promise<ClaimResult> {
    const { rows } = await db.query<ClaimRow>({
      ...readTimeout(options),
      text: options.backfill ? CLAIM_EVENT.backfill : options.logDeliveries === false ? CLAIM_EVENT.unlogged : CLAIM_EVENT.logged,
      values: [
        event.source,
        event.kind,
        event.eventId,
        event.type,
        event.rawBody,
        event.signedAt,
        JSON.stringify(event.meta),
        event.bodyHash ?? null,
        ...(options.backfill ? [options.backfill.detail] : []),
      ],
    });
    return claimResult(rows[0]);
  }

  /**
   * The claim for a batch of deliveries, in ONE round trip (ingest's group commit, see
   * claim-batcher.ts; sql CLAIM_EVENTS, whose comment explains its lock order). Same semantics
   * as claimEvent, per event. Keys must be unique within the batch (the caller folds repeats;
   * `copies` says how many deliveries each stands for). Results come back in input order.
   *
   * Deliberately NOT a named prepared statement: after five runs Postgres may switch a named
   * statement to a generic plan, and with parameters unknown (and a table whose statistics lag
   * its growth) one was seen looking duplicates up through the (provider, received_at) index,
   * reading every event of the source per duplicate. Unnamed, every batch gets a plan for its
   * values (~0.1 ms of planning), and the lookups stay on the unique indexes.
   * With `jobs` (QUEUE_BACKEND=postgres), the new events' dispatch jobs are inserted by the same
   * statement (insert on claim: ClaimJobs in postgres-queue.ts).
   */
  async function claimEvents(db: Pool, events: VerifiedEvent[], options: ClaimOptions & { copies?: number[]; jobs?: ClaimJobs } = {}): Promise<ClaimResult[]> {
    const { jobs } = options;
    const { rows } = await db.query<ClaimRow & { ord: number }>({
      ...readTimeout(options),
      text: claimEventsText(options.logDeliveries !== false, jobs),
      values: [
        events.map((e) => e.source),
        events.map((e) => e.kind),
        events.map((e) => e.eventId),
        events.map((e) => e.type),
        events.map((e) => e.rawBody),
        events.map((e) => e.signedAt),
        events.map((e) => JSON.stringify(e.meta)),
        events.map((e) => e.bodyHash ?? null),
        // Deliveries of this key folded into the batch (the log records each one).
        events.map((_e, i) => options.copies?.[i] ?? 1),
        bodyStripeKeys(events),
        // Insert on claim: the new events' jobs (sql CLAIM_EVENTS's `queued`).
        ...(jobs ? [jobs.ids, jobs.queues, jobs.datas, jobs.ord, jobs.channel] : []),
      ],
    });
    const byOrd = new Map(rows.map((row) => [Number(row.ord), row]));
    return events.map((_event, i) => claimResult(byOrd.get(i + 1)));
  }

  /**
   * Delivery-log rows for duplicates whose event the claim could not see (committed after its
   * snapshot): looked up now that it is committed, by id, else by body (a duplicate found by
   * its body under another id has no row of its own id). Never on a delivery's path.
   */
  async function logDeliveries(db: Queryable, deliveries: { source: string; eventId: string; bodyHash: Buffer | null; copies: number }[]): Promise<void> {
    await db.query(sql.LOG_DELIVERIES, [deliveries.map((d) => d.source), deliveries.map((d) => d.eventId), deliveries.map((d) => d.bodyHash), deliveries.map((d) => d.copies)]);
  }

  return { claimEvent, claimEvents, logDeliveries };
}
