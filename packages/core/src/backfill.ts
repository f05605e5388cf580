/**
 * Backfill's engine side (docs/operating.md, "Recovering missed events"): the events a
 * provider's API lists (its descriptor's `backfill`, @oncehook/shared backfill.ts) go through
 * the SAME claim as a delivery, on the same unique keys. So an event that was delivered is a
 * duplicate and changes nothing; a missing one is claimed with origin `backfill` (and which
 * backfill fetched it), its dispatch enqueued, and it runs through the handlers and
 * destinations like any other. A backfill racing a live redelivery of the same event creates
 * one event: the claim decides (INSERT ... ON CONFLICT DO NOTHING).
 *
 * It relies on the key horizon (KEY_RETENTION_DAYS, 400 days by default): a key outlives any
 * provider's listing window (Stripe 30 days), so "already known" is always answerable. An
 * event older than the horizon is not claimed (as a delivery of it would be answered
 * `expired`).
 */
import type { Logger, Pool } from '@oncehook/shared';
import type { BackfillItem } from '@oncehook/providers';
import { enqueueEvent, type JobTarget } from './queue.js';
import type { Queries } from './store/queries.js';

/** What a backfill found. */
export interface BackfillCounts {
  /** Events the API listed. */
  listed: number;
  /** Already claimed (delivered, or backfilled before): nothing done. */
  known: number;
  /** Claimed now (or, in a dry run, that would be). */
  new: number;
  /** Listed but not claimable: the same reasons a delivery of it would be refused for (payload limits, an id out of shape). */
  refused: number;
  /** Older than the key horizon: not claimed, as a delivery would be answered `expired`. */
  expired: number;
  /** New events whose dispatch could not be enqueued now (the queue unreachable): the reconciler enqueues them. */
  enqueueFailed: number;
}

export interface BackfillDeps {
  pool: Pool;
  queries: Queries;
  queue: JobTarget;
  log: Logger;
}

export interface BackfillOptions {
  /** Count only: look each event up, claim nothing, enqueue nothing. */
  dryRun: boolean;
  /** Which backfill this is (the command line or the schedule, who, when): each new event's origin detail. */
  detail: string;
  /** KEY_RETENTION_DAYS. */
  keyHorizonDays: number;
  now?: Date;
  /** Each listed event, once decided (the command's progress and its `--verbose` lines). */
  onItem?(item: { id: string; type: string | null; result: 'known' | 'new' | 'refused' | 'expired'; reason?: string }): void;
}

export const emptyBackfillCounts = (): BackfillCounts => ({ listed: 0, known: 0, new: 0, refused: 0, expired: 0, enqueueFailed: 0 });

/**
 * Claims every listed event that Oncehook does not have. `counts` is filled as it goes, so a
 * caller whose listing threw (an API error mid-way) still knows what was done.
 */
export async function claimBackfilled(deps: BackfillDeps, items: AsyncIterable<BackfillItem>, options: BackfillOptions, counts = emptyBackfillCounts()): Promise<BackfillCounts> {
  const { pool, queries, queue, log } = deps;
  const now = options.now ?? new Date();
  for await (const item of items) {
    counts.listed += 1;
    if ('refused' in item) {
      counts.refused += 1;
      log.warn({ eventId: item.refused.id, reason: item.refused.reason }, 'backfill: a listed event cannot be claimed');
      options.onItem?.({ id: item.refused.id, type: null, result: 'refused', reason: item.refused.reason });
      continue;
    }
    const { event } = item;
    if (event.signedAt && now.getTime() - event.signedAt.getTime() > options.keyHorizonDays * 86_400_000) {
      counts.expired += 1;
      options.onItem?.({ id: event.eventId, type: event.type, result: 'expired' });
      continue;
    }
    // mutant: backfill-dry-run-claims
    if (options.dryRun) {
      const known = (await queries.getEventByKey(pool, event.source, event.eventId)) !== null;
      if (known) counts.known += 1;
      else counts.new += 1;
      options.onItem?.({ id: event.eventId, type: event.type, result: known ? 'known' : 'new' });
      continue;
    }
    // The delivery's claim, with the backfill's origin (store/claim.ts): no delivery-log row.
    // mutant: backfill-claim-bypasses-key
    const claim = await queries.claimEvent(pool, event, { backfill: { detail: options.detail } });
    if (claim.outcome !== 'new') {
      counts.known += 1;
      options.onItem?.({ id: event.eventId, type: event.type, result: 'known' });
      continue;
    }
    counts.new += 1;
    log.info({ rowId: claim.rowId, source: event.source, eventId: event.eventId, type: event.type }, 'backfill: claimed an event the provider never delivered');
    try {
      await enqueueEvent(queue, { rowId: claim.rowId, source: event.source, eventId: event.eventId, kind: event.kind, type: event.type, attempt: 0 });
    } catch (error) {
      // Claimed and committed: the reconciler enqueues `received` events (REQUEUE_AFTER_MS).
      counts.enqueueFailed += 1;
      log.warn({ err: error, rowId: claim.rowId }, 'backfill: dispatch not enqueued now; the reconciler will');
    }
    options.onItem?.({ id: event.eventId, type: event.type, result: 'new' });
  }
  return counts;
}
