/**
 * Execution of the worker's statements (sql/runs.ts): dispatch, leases and the fence, run
 * transitions, recorded steps, per-object ordering and locks. The hot statements are named
 * prepared statements (prepared.ts); each function says what false or null means.
 */
import type { PreparedStatement } from '@oncehook/shared';
import { advisoryLockKey, flowLockKey } from '../lock-keys.js';
import type { EventRow, RunRow, StepKind } from '../vocabulary.js';
import { prepared } from './prepared.js';
import { reviveEvent, reviveRun, type LeasedRun, type Queryable, type RecordedStep } from './rows.js';
import { runStatements } from './sql/runs.js';
import type { Tables } from './tables.js';

/** The fence's row: the run's generation, and whether it must stop at this step boundary (`pause --now`). */
export interface RunFence {
  generation: number;
  stop: boolean;
}

/** One event's dispatch (dispatchAndLease's arguments). `deferred`: created `received`, not leased. */
export interface DispatchRequest {
  rowId: number;
  runs: { handler: string; token: string; deferred?: boolean }[];
  /** The delivery's traceparent (from the dispatch job), kept on the event for later leases. */
  traceParent: string | null;
}

/** What a dispatch created: the event (now `processing`) and its runs. */
export interface Dispatched {
  event: EventRow;
  runs: RunRow[];
}

/** A step's record (stepRecord). */
export interface StepRecord {
  runId: number;
  generation: number;
  name: string;
  kind: StepKind;
  result: unknown;
  idempotencyKey: string | null;
  keySubject?: string | null;
}

/**
 * SQLSTATE of a final step's record that found the lease no longer ours (the lease_lost
 * function, migrations/0017): the worker's LeaseLostError.
 */
export const LEASE_LOST = 'OH001';

export function createRunQueries(t: Tables, schemaName: string) {
  const sql = runStatements(t);
  const DISPATCH_AND_LEASE_SQL = prepared('dispatchAndLease', sql.DISPATCH_AND_LEASE);
  const DISPATCH_AND_LEASE_MANY_SQL = prepared('dispatchAndLeaseMany', sql.DISPATCH_AND_LEASE_MANY);
  const FINISH_UNHANDLED_SQL = prepared('finishUnhandled', sql.FINISH_UNHANDLED);
  const ACQUIRE_RUN_SQL = prepared('acquireRun', sql.ACQUIRE_RUN);
  const ACQUIRE_GATED_RUN_SQL = prepared('acquireGatedRun', sql.ACQUIRE_GATED_RUN);
  const LEASE_NEXT_WAITER_SQL = prepared('leaseNextWaiter', sql.LEASE_NEXT_WAITER);
  const ACQUIRE_CLAIMABLE_RUNS_SQL = prepared('acquireClaimableRuns', sql.ACQUIRE_CLAIMABLE_RUNS);
  const RENEW_LEASE_SQL = prepared('renewLease', sql.RENEW_LEASE);
  const LOCK_LEASED_RUN_SQL = prepared('lockLeasedRun', sql.LOCK_LEASED_RUN);
  const RENEW_LEASE_AT_STEP_SQL = prepared('renewLeaseAtStep', sql.RENEW_LEASE_AT_STEP);
  const RENEW_LEASES_AT_STEP_SQL = prepared('renewLeasesAtStep', sql.RENEW_LEASES_AT_STEP);
  const MARK_RUN_DONE_SQL = prepared('markRunDone', sql.MARK_RUN_DONE);
  const MARK_RUNS_DONE_SQL = prepared('markRunsDone', sql.MARK_RUNS_DONE);
  const MARK_RUN_FAILED_SQL = prepared('markRunFailed', sql.MARK_RUN_FAILED);
  const RECORD_FINAL_STEP_SQL = prepared('recordFinalStep', sql.RECORD_FINAL_STEP);
  const RELEASE_RUN_FOR_RETRY_SQL = prepared('releaseRunForRetry', sql.RELEASE_RUN_FOR_RETRY);
  const RECORD_STEP_SQL = prepared('recordStep', sql.RECORD_STEP);
  const RECORD_EXTERNAL_STEP_SQL = prepared('recordExternalStep', sql.RECORD_EXTERNAL_STEP(false));
  const RECORD_FINAL_EXTERNAL_STEP_SQL = prepared('recordFinalExternalStep', sql.RECORD_EXTERNAL_STEP(true));
  const RECORD_EXTERNAL_STEPS_SQL = prepared('recordExternalSteps', sql.RECORD_EXTERNAL_STEPS);

  /**
   * Dispatch: received -> processing, one run per handler, each already leased to the caller
   * with its own token. null = the event is not `received`: the caller looks for claimable runs.
   */
  async function dispatchAndLease(
    db: Queryable,
    rowId: number,
    /** `deferred`: created `received`, not leased (a limited or lower-priority handler). */
    runs: { handler: string; token: string; deferred?: boolean }[],
    leaseMs: number,
    /** The delivery's traceparent (from the dispatch job), kept on the event for later leases. */
    traceParent: string | null = null,
  ): Promise<Dispatched | null> {
    const { rows } = await db.query<{ event: EventRow; runs: RunRow[] | null }>(
      DISPATCH_AND_LEASE_SQL([rowId, runs.map((r) => r.handler), runs.map((r) => r.token), leaseMs, traceParent, runs.map((r) => r.deferred === true)]),
    );
    const row = rows[0];
    if (!row) return null;
    return { event: reviveEvent(row.event), runs: (row.runs ?? []).map(reviveRun) };
  }

  /**
   * dispatchAndLease for several distinct events in one statement (sql DISPATCH_AND_LEASE_MANY):
   * the result of each event dispatched, by its row id; an event missing is not `received`.
   */
  async function dispatchAndLeaseMany(db: Queryable, requests: readonly DispatchRequest[], leaseMs: number): Promise<Map<number, Dispatched>> {
    const runs = requests.flatMap((request) => request.runs.map((run) => ({ rowId: request.rowId, ...run })));
    const { rows } = await db.query<{ rowId: number | string; event: EventRow; runs: RunRow[] | null }>(
      DISPATCH_AND_LEASE_MANY_SQL([
        requests.map((r) => r.rowId),
        requests.map((r) => r.runs.length),
        requests.map((r) => r.traceParent),
        runs.map((r) => r.rowId),
        runs.map((r) => r.handler),
        runs.map((r) => r.token),
        runs.map((r) => r.deferred === true),
        leaseMs,
      ]),
    );
    return new Map(rows.map((row) => [Number(row.rowId), { event: reviveEvent(row.event), runs: (row.runs ?? []).map(reviveRun) }]));
  }

  /** An event with no handler: received -> done (or failed) with a note. false = dispatched or finished meanwhile. */
  async function finishUnhandled(db: Queryable, rowId: number, state: 'done' | 'failed', note: string): Promise<boolean> {
    const { rowCount } = await db.query(FINISH_UNHANDLED_SQL([rowId, state, note]));
    return rowCount === 1;
  }

  /** The leased runs as the lease statement returned them, with their recorded steps (sql LEASED_RUN_RETURNING says how). */
  function leasedRuns(rows: (RunRow & { event: EventRow; steps: RecordedStep[] })[], leasedAt: number): LeasedRun[] {
    return rows.map(({ event, steps, ...run }) => ({ run: run as RunRow, event: reviveEvent(event), steps, leasedAt }));
  }

  /**
   * The guarded claim of one run: received -> processing, or take over an expired lease, with
   * its event and its recorded steps, in one statement. null = not ours to run (done or failed, leased by a live
   * worker, or no such run): the caller acknowledges the job and does nothing else.
   */
  async function acquireRun(db: Queryable, rowId: number, handler: string, token: string, leaseMs: number, flowKey: string | null = null): Promise<LeasedRun | null> {
    const leasedAt = performance.now();
    const { rows } = await db.query<RunRow & { event: EventRow; steps: RecordedStep[] }>(ACQUIRE_RUN_SQL([rowId, handler, token, leaseMs, flowKey]));
    return leasedRuns(rows, leasedAt)[0] ?? null;
  }

  /**
   * acquireRun for a concurrency-limited handler: its slot and its lease in one statement (sql
   * ACQUIRE_GATED_RUN), run on its own so that it commits at once. `leased` null: full when
   * `slotsInUse` >= `limit`, otherwise not ours to run.
   */
  async function acquireGatedRun(
    db: Queryable,
    run: { rowId: number; handler: string; token: string; leaseMs: number; flowKey: string | null },
    limit: number,
  ): Promise<{ slotsInUse: number; leased: LeasedRun | null }> {
    const leasedAt = performance.now();
    const lockKey = flowLockKey(schemaName, run.handler, run.flowKey);
    const { rows } = await db.query<RunRow & { event: EventRow; steps: RecordedStep[]; slotsInUse: number }>(
      ACQUIRE_GATED_RUN_SQL([run.rowId, run.handler, run.token, run.leaseMs, run.flowKey, lockKey, limit]),
    );
    const { slotsInUse, ...row } = rows[0]!;
    if (row.id === null) return { slotsInUse, leased: null };
    return { slotsInUse, leased: leasedRuns([row], leasedAt)[0] ?? null };
  }

  /**
   * A freed slot of (handler, key) handed to its longest waiter, leased in the wake-up (sql
   * LEASE_NEXT_WAITER), for a caller that runs it at once. `leased` null: none waits
   * (`waiterId` null; also when the slots are full), or the waiter was not leased (its handler
   * or source is paused: `waiterId` is its run; the caller wakes it the usual way).
   */
  async function leaseNextWaiter(
    db: Queryable,
    slot: { handler: string; flowKey: string | null; token: string; leaseMs: number },
    limit: number,
  ): Promise<{ slotsInUse: number; waiterId: number | null; leased: LeasedRun | null }> {
    const leasedAt = performance.now();
    const lockKey = flowLockKey(schemaName, slot.handler, slot.flowKey);
    const { rows } = await db.query<RunRow & { event: EventRow; steps: RecordedStep[]; slotsInUse: number; waiterId: number | string | null }>(
      LEASE_NEXT_WAITER_SQL([slot.handler, slot.flowKey, lockKey, limit, slot.token, slot.leaseMs]),
    );
    const { slotsInUse, waiterId, ...row } = rows[0]!;
    const waiter = waiterId === null ? null : Number(waiterId);
    if (row.id === null) return { slotsInUse, waiterId: waiter, leased: null };
    return { slotsInUse, waiterId: waiter, leased: leasedRuns([row], leasedAt)[0] ?? null };
  }

  /** Every claimable run of an event, leased to the caller at once (a repeated dispatch job). */
  async function acquireClaimableRuns(db: Queryable, rowId: number, token: string, leaseMs: number, except: string[] = []): Promise<LeasedRun[]> {
    const leasedAt = performance.now();
    const { rows } = await db.query<RunRow & { event: EventRow; steps: RecordedStep[] }>(ACQUIRE_CLAIMABLE_RUNS_SQL([rowId, token, leaseMs, except]));
    return leasedRuns(rows, leasedAt);
  }

  /** A run from before handler names takes the one handler's name. false = bound meanwhile (or gone). */
  async function bindLegacyRun(db: Queryable, runId: number, token: string, handler: string): Promise<boolean> {
    const { rowCount } = await db.query(sql.BIND_LEGACY_RUN, [runId, token, handler]);
    return rowCount === 1;
  }

  /** Extends our lease. false = it is no longer ours (taken over, or released): stop, commit nothing. */
  async function renewLease(db: Queryable, runId: number, token: string, leaseMs: number): Promise<boolean> {
    const { rowCount } = await db.query(RENEW_LEASE_SQL([runId, token, leaseMs]));
    return rowCount === 1;
  }

  /**
   * The fence as a statement, for the step transaction to open with (withTransactionFrom: BEGIN
   * and the fence in one round trip). Its one row is a RunFence; none = the lease was taken
   * over: commit nothing.
   */
  function fenceStatement(runId: number, token: string): PreparedStatement {
    return LOCK_LEASED_RUN_SQL([runId, token]);
  }

  /** The renewal before an external call. null = the lease is no longer ours; `stop`: `pause --now`, do not call. */
  /**
   * The lease proven before an external call (RENEW_LEASE_AT_STEP): read when it has `needMs`
   * left, else renewed (`renewed`: the lease clock moves on). null = the lease is no longer ours.
   */
  async function renewLeaseAtStep(db: Queryable, runId: number, token: string, leaseMs: number, needMs: number): Promise<{ stop: boolean; renewed: boolean } | null> {
    const { rows } = await db.query<{ stop: boolean; fresh: boolean; renewed: boolean }>(RENEW_LEASE_AT_STEP_SQL([runId, token, leaseMs, Math.trunc(needMs)]));
    const held = rows[0];
    if (!held || (!held.fresh && !held.renewed)) return null;
    return { stop: held.stop, renewed: held.renewed };
  }

  /**
   * renewLeaseAtStep for several runs in one statement (run-batchers.ts): each run's
   * answer by its run id, as alone; a run missing is no longer ours.
   */
  async function renewLeasesAtStep(
    db: Queryable,
    proofs: readonly { runId: number; token: string; leaseMs: number; needMs: number }[],
  ): Promise<Map<number, { stop: boolean; renewed: boolean } | null>> {
    const { rows } = await db.query<{ id: number | string; stop: boolean; fresh: boolean; renewed: boolean }>(
      RENEW_LEASES_AT_STEP_SQL([proofs.map((p) => p.runId), proofs.map((p) => p.token), proofs.map((p) => p.leaseMs), proofs.map((p) => Math.trunc(p.needMs))]),
    );
    return new Map(rows.map((held) => [Number(held.id), !held.fresh && !held.renewed ? null : { stop: held.stop, renewed: held.renewed }]));
  }

  /** A run stopped by `pause --now`: back to received, waiting paused, its attempt given back. false = lease lost. */
  async function releaseRunPaused(db: Queryable, runId: number, token: string): Promise<boolean> {
    const { rowCount } = await db.query(sql.RELEASE_RUN_PAUSED, [runId, token]);
    return rowCount === 1;
  }

  /** processing -> done, fenced, with the event. false = our lease was taken over: report nothing. */
  async function markRunDone(db: Queryable, runId: number, token: string, note: string | null = null): Promise<boolean> {
    const { rowCount } = await db.query(MARK_RUN_DONE_SQL([runId, token, note]));
    return rowCount === 1;
  }

  /** markRunDone for several runs in one statement (run-batchers.ts): the ids of the runs marked done; a run missing lost its lease. */
  async function markRunsDone(db: Queryable, runs: readonly { runId: number; token: string }[]): Promise<Set<number>> {
    const { rows } = await db.query<{ id: number | string }>(MARK_RUNS_DONE_SQL([runs.map((r) => r.runId), runs.map((r) => r.token)]));
    return new Set(rows.map((row) => Number(row.id)));
  }

  /**
   * A `final` step's record and the run's done, as one statement for the step to commit with
   * (commitWith). The lease lost fails it with LEASE_LOST (never 0 rows): the COMMIT behind it
   * is then skipped.
   */
  function finalStepRecord(step: StepRecord, token: string): PreparedStatement {
    return RECORD_FINAL_STEP_SQL([step.runId, token, step.generation, step.name, JSON.stringify(step.result ?? null), step.kind, step.idempotencyKey, step.keySubject ?? null]);
  }

  /** processing -> failed (the dead letter state), fenced, with the event. false = lease lost. */
  async function markRunFailed(db: Queryable, runId: number, token: string, error: string): Promise<boolean> {
    const { rowCount } = await db.query(MARK_RUN_FAILED_SQL([runId, token, error]));
    return rowCount === 1;
  }

  /** processing -> received after a retryable error, fenced; the worker enqueues the next attempt. false = lease lost. */
  async function releaseRunForRetry(db: Queryable, runId: number, token: string, error: string): Promise<boolean> {
    const { rowCount } = await db.query(RELEASE_RUN_FOR_RETRY_SQL([runId, token, error]));
    return rowCount === 1;
  }

  /**
   * A completed step's record, as a statement for a transaction that holds the fence to commit
   * with (commitWith). A second record of the same step is a unique violation: nothing commits.
   */
  function stepRecord(step: StepRecord): PreparedStatement {
    return RECORD_STEP_SQL([step.runId, step.generation, step.name, step.kind, JSON.stringify(step.result ?? null), step.idempotencyKey, step.keySubject ?? null]);
  }

  /**
   * An external step's record, fenced, in one statement and one round trip (RECORD_EXTERNAL_STEP;
   * `final`: with the run's and the event's done). null = the lease was lost; else whether the
   * record went in (only for the generation the call was made for: a replay meanwhile records
   * nothing) and whether `pause --now` asks the run to stop after it.
   */
  async function recordExternalStep(db: Queryable, step: StepRecord, token: string, final: boolean): Promise<{ stop: boolean; recorded: boolean } | null> {
    const statement = final ? RECORD_FINAL_EXTERNAL_STEP_SQL : RECORD_EXTERNAL_STEP_SQL;
    const { rows } = await db.query<{ stop: boolean; recorded: boolean }>(
      statement([step.runId, token, step.generation, step.name, JSON.stringify(step.result ?? null), step.idempotencyKey, step.keySubject ?? null]),
    );
    return rows[0] ?? null;
  }

  /**
   * recordExternalStep for several runs in one statement (run-batchers.ts): each run's fence and
   * record (a final one: with its run's and event's done) by its run id; a run missing lost its
   * lease (nothing written).
   */
  async function recordExternalSteps(
    db: Queryable,
    records: readonly { step: StepRecord; token: string; final: boolean }[],
  ): Promise<Map<number, { stop: boolean; recorded: boolean }>> {
    const { rows } = await db.query<{ id: number | string; stop: boolean; recorded: boolean }>(
      RECORD_EXTERNAL_STEPS_SQL([
        records.map((r) => r.step.runId),
        records.map((r) => r.token),
        records.map((r) => r.step.generation),
        records.map((r) => r.step.name),
        records.map((r) => JSON.stringify(r.step.result ?? null)),
        records.map((r) => r.step.idempotencyKey),
        records.map((r) => r.step.keySubject ?? null),
        records.map((r) => r.final),
      ]),
    );
    return new Map(rows.map((row) => [Number(row.id), { stop: row.stop, recorded: row.recorded }]));
  }

  /** ctx.lock: serialises local steps about one object until the step's COMMIT/ROLLBACK. */
  async function lockObject(tx: Queryable, objectKey: string): Promise<void> {
    await tx.query(sql.LOCK_OBJECT, [advisoryLockKey(schemaName, 'object', objectKey)]);
  }

  /**
   * ctx.ordered: records `version` for (handler, object) unless a higher one is recorded;
   * `previous` is the newest version recorded before (null: the first), read under the row lock.
   * Equal versions are not stale (a replay of the same update applies).
   */
  async function recordObjectVersion(tx: Queryable, handler: string, objectKey: string, version: number): Promise<{ stale: boolean; previous: number | null }> {
    const { rows } = await tx.query<{ previous: string | null }>(sql.RECORD_OBJECT_VERSION, [handler, objectKey, version]);
    const previous = rows[0]!.previous === null ? null : Number(rows[0]!.previous);
    // mutant: ordered-never-stale
    return { stale: previous !== null && previous > version, previous };
  }

  return {
    dispatchAndLease,
    dispatchAndLeaseMany,
    finishUnhandled,
    acquireRun,
    acquireGatedRun,
    leaseNextWaiter,
    acquireClaimableRuns,
    bindLegacyRun,
    renewLease,
    fenceStatement,
    renewLeaseAtStep,
    renewLeasesAtStep,
    releaseRunPaused,
    lockObject,
    recordObjectVersion,
    finalStepRecord,
    markRunDone,
    markRunsDone,
    markRunFailed,
    releaseRunForRetry,
    stepRecord,
    recordExternalStep,
    recordExternalSteps,
  };
}
