/**
 * The scheduled backfill (BACKFILL_SCHEDULE; docs/operating.md, "Recovering missed events"):
 * every `every`, the events a source's provider could not deliver in the last `window`, listed
 * from its API and claimed (backfill.ts), as `oncehook backfill` does by hand.
 *
 * - One process at a time, fleet-wide: a pass runs only after its source's row was leased by a
 *   guarded UPDATE (store/sql/backfill-schedule.ts LEASE_PASS); a crashed holder's lease
 *   expires. Every worker ticks; the one that leases the row runs the pass.
 * - Bounded: at most `maxCallsPerPass` API calls per pass; where it stopped is kept (`cursor`)
 *   and the next pass goes on from there, after `continueMs` (or the interval, if shorter).
 * - Rate limits: the provider's 429 is waited out (its Retry-After, at most
 *   `maxRateLimitWaitMs`) by the listing itself; past MAX_RATE_LIMITED_IN_A_ROW the pass ends
 *   with the error recorded, and the next one, an interval later, goes on from the cursor.
 * - Counted: oncehook_backfill_events_total{source,result} and
 *   oncehook_backfill_passes_total{source,outcome}; an event found only by a backfill is a sign
 *   that deliveries are being lost (the alert "BackfillFoundMissedEvents" says what to check),
 *   and is logged at warn.
 */
import { randomUUID } from 'node:crypto';
import { describeError, type Logger, type Pool, type WorkerMetrics } from '@oncehook/shared';
import { providerOf } from '@oncehook/providers';
import { claimBackfilled, emptyBackfillCounts, type BackfillCounts } from './backfill.js';
import type { JobTarget } from './queue.js';
import type { Queries } from './store/queries.js';

/** One scheduled source. */
export interface BackfillScheduleEntry {
  /** The source (its name: the dedupe namespace). */
  source: string;
  /** Its provider kind (which API lists its events). */
  kind: string;
  everyMs: number;
  windowMs: number;
}

export interface BackfillSchedulerDeps {
  pool: Pool;
  queries: Queries;
  queue: JobTarget;
  log: Logger;
  metrics?: Pick<WorkerMetrics, 'backfillEvents' | 'backfillPasses'>;
  schedule: readonly BackfillScheduleEntry[];
  /** Where the providers' API variables are read (STRIPE_API_KEY ...). */
  env: Record<string, string | undefined>;
  keyHorizonDays: number;
  maxCallsPerPass: number;
  /** This process, in each claimed event's origin detail. */
  workerId: string;
  /** How long a pass may hold its source's row (default 10 minutes). */
  leaseMs?: number;
  /** After a pass stopped at its bound, the next one this soon (default 60 s; never later than the interval). */
  continueMs?: number;
  maxRateLimitWaitMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

export interface BackfillPassResult {
  source: string;
  counts: BackfillCounts;
  error: string | null;
  /** More pages were left: the next pass goes on from there. */
  bounded: boolean;
}

export interface BackfillScheduler {
  /** One tick: every due source whose row this process leases gets a pass. */
  runOnce(): Promise<BackfillPassResult[]>;
  start(): void;
  stop(): Promise<void>;
}

const RESULTS = ['known', 'new', 'refused', 'expired'] as const;

export function createBackfillScheduler(deps: BackfillSchedulerDeps): BackfillScheduler {
  const { pool, queries, queue, log, metrics, schedule } = deps;
  const leaseMs = deps.leaseMs ?? 600_000;
  const continueMs = deps.continueMs ?? 60_000;
  const tickMs = Math.max(200, Math.min(5_000, ...schedule.map((e) => e.everyMs / 2)));
  let ensured = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | null = null;
  let stopped = false;

  async function pass(entry: BackfillScheduleEntry, token: string, from: string | null): Promise<BackfillPassResult> {
    const api = providerOf(entry.kind).backfill;
    const counts = emptyBackfillCounts();
    if (!api) return { source: entry.source, counts, error: `${entry.kind} has no backfill`, bounded: false };
    const now = new Date();
    let cursor = from;
    let error: string | null = null;
    try {
      const items = api.list(
        {
          env: deps.env,
          source: { name: entry.source, kind: entry.kind },
          maxCalls: deps.maxCallsPerPass,
          maxRateLimitWaitMs: deps.maxRateLimitWaitMs ?? 60_000,
          cursor: from,
          ...(deps.sleep ? { sleep: deps.sleep } : {}),
        },
        { since: new Date(now.getTime() - entry.windowMs), until: now, types: null, all: false },
        {
          onCursor: (next) => (cursor = next),
          onRateLimited: (waitMs) => log.warn({ source: entry.source, waitMs }, 'scheduled backfill: the provider answered 429; waiting, then asking again'),
        },
      );
      await claimBackfilled(
        { pool, queries, queue, log },
        items,
        { dryRun: false, detail: `scheduled backfill of ${entry.source} (${deps.workerId}, ${now.toISOString()})`, keyHorizonDays: deps.keyHorizonDays, now },
        counts,
      );
    } catch (caught) {
      error = describeError(caught);
    }
    for (const result of RESULTS) if (counts[result] > 0) metrics?.backfillEvents.inc({ source: entry.source, result }, counts[result]);
    metrics?.backfillPasses.inc({ source: entry.source, outcome: error === null ? 'ok' : 'error' });
    if (counts.new > 0) {
      log.warn(
        { source: entry.source, new: counts.new, known: counts.known },
        `scheduled backfill found ${counts.new} event(s) the provider never delivered: deliveries to this endpoint are being lost (check the endpoint's URL and secret at the provider, ingest's 4xx/5xx, and what sits in front of it)`,
      );
    } else log.info({ source: entry.source, ...counts, error }, 'scheduled backfill pass');
    if (error !== null) log.error({ source: entry.source, error, ...counts }, 'scheduled backfill pass failed; the next pass goes on from where it stopped');
    const bounded = cursor !== null && error === null;
    const recorded = await queries.finishBackfillPass(pool, entry.source, token, {
      nextInMs: bounded ? Math.min(continueMs, entry.everyMs) : entry.everyMs,
      cursor,
      counts: { ...counts },
      error,
    });
    if (!recorded) log.warn({ source: entry.source }, 'scheduled backfill: the pass outlived its lease; another process took the source over');
    return { source: entry.source, counts, error, bounded };
  }

  async function runOnce(): Promise<BackfillPassResult[]> {
    if (!ensured) {
      await queries.ensureBackfillSources(
        pool,
        schedule.map((e) => e.source),
      );
      ensured = true;
    }
    const results: BackfillPassResult[] = [];
    for (const entry of schedule) {
      if (stopped) break;
      const token = randomUUID();
      const leased = await queries.leaseBackfillPass(pool, entry.source, token, leaseMs);
      if (!leased) continue;
      results.push(await pass(entry, token, leased.cursor));
    }
    return results;
  }

  function loop(): void {
    if (stopped) return;
    running = runOnce()
      .catch((error: unknown) => log.warn({ err: error }, 'scheduled backfill tick failed; next tick retries'))
      .finally(() => {
        running = null;
        if (!stopped) timer = setTimeout(loop, tickMs);
      });
  }

  return {
    runOnce,
    start() {
      if (schedule.length === 0 || timer !== undefined || running) return;
      stopped = false;
      loop();
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
