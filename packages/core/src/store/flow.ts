/**
 * Execution of flow control's statements (sql/flow.ts). `gateAcquire` is the one place a
 * limited handler's run takes a slot and a start: its transaction is the atomic unit.
 */
import { withTransaction, type Pool } from '@oncehook/shared';
import { flowLockKey } from '../lock-keys.js';
import type { EventJobData, RunWaiting } from '../vocabulary.js';
import type { LeasedRun, Queryable } from './rows.js';
import type { createRunQueries } from './runs.js';
import { flowStatements } from './sql/flow.js';
import type { Tables } from './tables.js';

/** What a limited run's gate asks for (flow-control.ts computes it from the handler and the event). */
export interface GateRequest {
  rowId: number;
  source: string;
  eventId: string;
  handler: string;
  token: string;
  leaseMs: number;
  /** The job's fence (EventJobData.wait); null for a job from outside flow control. */
  wait: number | null;
  concurrency?: { limit: number; key: string | null };
  rate?: { limit: number; periodMs: number; key: string };
}

export type GateResult =
  | { kind: 'leased'; leased: LeasedRun }
  /**
   * Over a limit: the run waits. `job` (null when this job's fence was stale) is its next job
   * for the rate; a run waiting for a slot gets none (it is woken; the caller looks at the
   * slots once more after this wait's commit).
   */
  | { kind: 'wait'; reason: Exclude<RunWaiting, 'paused'>; job: EventJobData | null; ahead: number }
  /** Not ours to run (finished, leased by a live worker, or paused). */
  | { kind: 'not-claimable' };

export interface PauseRow {
  scope: 'handler' | 'source';
  name: string;
  reason: string;
  actor: string;
  /** `--now`: runs in progress stop at their next step boundary too. */
  stopNow: boolean;
  pausedAt: Date;
  /** Runs waiting for this pause to end (LIST_PAUSES only). */
  waiting?: number;
}

class Rollback extends Error {}

/**
 * How many windows ahead a run waiting for the rate may be scheduled at most: the runs ahead of
 * it are counted up to this many windows' worth (each count is bounded), and one further back
 * looks again after that many windows (and counts again).
 */
export const RATE_WINDOWS_AHEAD = 10;

export function createFlowQueries(t: Tables, schemaName: string, runs: ReturnType<typeof createRunQueries>) {
  const sql = flowStatements(t);

  /**
   * One limited run through its gate. Two paths:
   *
   * - Concurrency only (the common case): ONE statement (runs.acquireGatedRun, sql
   *   ACQUIRE_GATED_RUN) queues for the (handler, key) advisory lock, counts the slots in use
   *   (flow_gate: a snapshot of its own, taken after the lock was granted, so every lease the
   *   previous holder committed is counted) and takes the lease below the limit. Autocommit: the
   *   lock is released when that statement's commit makes the lease visible, with no client
   *   round trip while it is held, so the gates of one (handler, key) are serialized for a
   *   fraction of a millisecond each, not for three round trips (the serialization point that
   *   held a limited handler to a few tens of runs per second: docs/benchmarks.md). Full: the
   *   run waits (WAIT, its own statement, after the lock; the caller then looks at the slots
   *   once more, which closes the race with a run freeing its slot meanwhile).
   * - With a rate limit: ONE transaction, because a start taken from the rate window must be
   *   given back (rolled back) when the lease is not taken:
   *     1. concurrency: flow_gate with `wait` false: the lock TRIED (pg_try_advisory_xact_lock)
   *        and the slots counted in one statement. Held across this transaction's round trips, so
   *        a gate that does not get it at once does not queue for it (dozens of waiting
   *        transactions, each holding a connection, slowed a backlog to a crawl): the run joins
   *        the line instead, without counting; full -> wait;
   *     2. rate: one start taken from the current window; full -> wait;
   *     3. the guarded lease (ACQUIRE_RUN), recording the run's key; 0 rows -> roll back (the
   *        start is given back) and report not-claimable.
   *   The lock is held until COMMIT, when the new lease is visible to the next gate's count.
   * Either way two gates can never both see a free last slot.
   */
  async function gateAcquire(pool: Pool, req: GateRequest, hooks: { afterCount?: () => Promise<void> } = {}): Promise<GateResult> {
    const flowKey = req.concurrency ? (req.concurrency.key ?? null) : null;
    if (req.concurrency && !req.rate) {
      const { limit } = req.concurrency;
      const { slotsInUse, leased } = await runs.acquireGatedRun(pool, { rowId: req.rowId, handler: req.handler, token: req.token, leaseMs: req.leaseMs, flowKey }, limit);
      if (leased) return { kind: 'leased', leased };
      if (slotsInUse < limit) return { kind: 'not-claimable' };
      return { kind: 'wait', reason: 'concurrency', ...(await markWaiting(pool, req, 'concurrency', flowKey)) };
    }
    // The lease's clock starts before BEGIN: ACQUIRE_RUN's now() is the transaction's start.
    const leasedAt = performance.now();
    try {
      return await withTransaction(pool, async (tx) => {
        let reason: 'concurrency' | 'rate-limit' | null = null;
        if (req.concurrency) {
          const { rows } = await tx.query<{ n: number | null }>(sql.GATE_TRY, [flowLockKey(schemaName, req.handler, flowKey), req.handler, flowKey]);
          const inUse = rows[0]!.n;
          // NULL: another gate holds the lock; the run joins the line without counting.
          if (inUse === null || inUse >= req.concurrency.limit) reason = 'concurrency';
          // The fault point worker.gate-after-count: tests hold two gates here at once.
          if (inUse !== null) await hooks.afterCount?.();
        }
        if (reason === null && req.rate) {
          const { rowCount } = await tx.query(sql.TAKE_RATE, [req.handler, req.rate.key, req.rate.periodMs, req.rate.limit]);
          if (rowCount === 0) reason = 'rate-limit';
        }
        if (reason !== null) return { kind: 'wait', reason, ...(await markWaiting(tx, req, reason, flowKey)) };
        const leased = await runs.acquireRun(tx, req.rowId, req.handler, req.token, req.leaseMs, flowKey);
        if (!leased) throw new Rollback();
        return { kind: 'leased', leased: { ...leased, leasedAt } };
      });
    } catch (error) {
      if (error instanceof Rollback) return { kind: 'not-claimable' };
      throw error;
    }
  }

  /**
   * The run waits (WAIT): its next job, or null when this job's fence was stale (a newer job
   * owns the wait); `ahead`, for the rate, how many runs of its handler and key waited longer.
   */
  async function markWaiting(db: Queryable, req: GateRequest, reason: 'concurrency' | 'rate-limit', flowKey: string | null): Promise<{ job: EventJobData | null; ahead: number }> {
    const { rows } = await db.query<{ waits: number; attempts: number; generation: number; ahead: number | null }>(sql.WAIT, [
      req.rowId,
      req.handler,
      reason,
      flowKey,
      req.wait,
      req.concurrency?.limit ?? null,
      req.rate?.key ?? null,
      // A few windows' worth: a waiter further back looks again then, and counts again.
      (req.rate?.limit ?? 0) * RATE_WINDOWS_AHEAD,
    ]);
    const row = rows[0];
    if (!row) return { job: null, ahead: 0 };
    return {
      job: { rowId: req.rowId, source: req.source, eventId: req.eventId, handler: req.handler, generation: row.generation, attempt: row.attempts, wait: row.waits },
      ahead: row.ahead ?? 0,
    };
  }

  return {
    gateAcquire,

    /** A run found paused is marked so (no job polls it; the resume enqueues it). false = not paused. */
    async markPaused(db: Queryable, rowId: number, handler: string): Promise<boolean> {
      return ((await db.query(sql.MARK_PAUSED, [rowId, handler])).rowCount ?? 0) === 1;
    },

    /** The next run waiting for a slot of (handler, key): its job, fence bumped, to enqueue now. */
    async wakeNext(db: Queryable, handler: string, flowKey: string | null): Promise<EventJobData | null> {
      return (await db.query<EventJobData>(sql.WAKE_NEXT, [handler, flowKey])).rows[0] ?? null;
    },

    /** The slots of (handler, key) in use now: its runs in progress under a live lease (read without the lock). */
    async slotsInUse(db: Queryable, handler: string, flowKey: string | null): Promise<number> {
      return (await db.query<{ n: number }>(sql.IN_FLIGHT, [handler, flowKey])).rows[0]!.n;
    },

    /** The reconciler's repair: waiters of groups with a free slot nobody woke, woken (their jobs to enqueue). */
    async wakeStalled(db: Queryable, olderThanMs: number, limit: number): Promise<EventJobData[]> {
      return (await db.query<EventJobData>(sql.WAKE_STALLED, [olderThanMs, limit])).rows;
    },

    /**
     * Pauses a handler or a source (`now`: runs in progress stop at their next step boundary).
     * null = it was paused already (and `now` changed nothing); `created` false = an existing
     * pause that `now` made stop runs in progress too.
     */
    async pause(db: Queryable, scope: 'handler' | 'source', name: string, actor: string, reason: string, now = false): Promise<(PauseRow & { created: boolean }) | null> {
      return (await db.query<PauseRow & { created: boolean }>(sql.PAUSE, [scope, name, reason, actor, now])).rows[0] ?? null;
    },

    /** Ends a pause. null = it was not paused. */
    async resume(db: Queryable, scope: 'handler' | 'source', name: string, actor: string, reason: string): Promise<PauseRow | null> {
      return (await db.query<PauseRow>(sql.RESUME, [scope, name, actor, reason])).rows[0] ?? null;
    },

    /** Up to `limit` paused runs no pause covers now, released: their jobs to enqueue. */
    async releasePaused(db: Queryable, limit: number): Promise<EventJobData[]> {
      return (await db.query<EventJobData>(sql.RELEASE_PAUSED, [limit])).rows;
    },

    async listPauses(db: Queryable): Promise<PauseRow[]> {
      return (await db.query<PauseRow>(sql.LIST_PAUSES)).rows;
    },

    async waitingCounts(db: Queryable): Promise<{ handler: string; waiting: RunWaiting; n: number }[]> {
      return (await db.query<{ handler: string; waiting: RunWaiting; n: number }>(sql.WAITING_COUNTS)).rows;
    },

    /** A breaker handler's failed attempt: its failures in a row now. */
    async recordFailure(db: Queryable, handler: string, error: string): Promise<number> {
      return (await db.query<{ failures: number }>(sql.RECORD_FAILURE, [handler, error.slice(0, 2_000)])).rows[0]!.failures;
    },

    /** Priority aging: runs of these lower-priority handlers waiting longer than `olderThanMs`, their front-of-queue jobs. */
    async agedRuns(db: Queryable, handlers: string[], olderThanMs: number, limit: number): Promise<EventJobData[]> {
      if (handlers.length === 0) return [];
      return (await db.query<EventJobData>(sql.AGED_RUNS, [handlers, olderThanMs, limit])).rows;
    },

    /** A breaker handler's success: the count restarts. */
    async recordSuccess(db: Queryable, handler: string): Promise<void> {
      await db.query(sql.RECORD_SUCCESS, [handler]);
    },
  };
}
