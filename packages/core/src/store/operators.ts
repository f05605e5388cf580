/**
 * Execution of the operators' statements (sql/operators.ts): re-drive and replay, the reads
 * behind the events view, the API and the CLI, the gauges, the handlers registry.
 */
import type { EventRow, RunRow, RunState } from '../vocabulary.js';
import { prepared } from './prepared.js';
import type {
  AttemptRecord,
  DeliveryRecord,
  EventDetail,
  EventFilter,
  EventSummary,
  FailureGroup,
  HandlerState,
  OpenedGroup,
  RegisteredHandler,
  RegistryEntry,
  MovedRun,
  OperatorAction,
  PendingCounts,
  Queryable,
  RecordedStep,
  RunSummary,
  StepRecord,
} from './rows.js';
import { operatorStatements } from './sql/operators.js';
import type { Tables } from './tables.js';

type MovedRow = { runId: number; handler: string; fromState: RunState; generation: number; source: string; eventId: string };
type SummaryRow = EventSummary & { runs: (RunSummary & { updatedAt: string })[] };

const summary = (row: SummaryRow): EventSummary => ({ ...row, runs: row.runs.map((r) => ({ ...r, updatedAt: new Date(r.updatedAt) })) });

function moved(rowId: number, row: MovedRow): MovedRun {
  return {
    runId: row.runId,
    handler: row.handler,
    fromState: row.fromState,
    generation: row.generation,
    job: { rowId, source: row.source, eventId: row.eventId, handler: row.handler, generation: row.generation, attempt: 0 },
  };
}

/**
 * How far arrival order (row ids) and arrival times (received_at) can disagree: a claim's id
 * comes from the sequence during its statement, its time is its transaction's start, and a
 * claim transaction lasts milliseconds (its deadline is seconds). The id range of a time range
 * is widened by this much; rows in the margin are filtered out by their time.
 */
const ARRIVAL_SKEW_MS = 5 * 60_000;

export function createOperatorQueries(t: Tables) {
  const sql = operatorStatements(t);

  /**
   * The first row id received at or after `at` (or past the last row): a binary search on the
   * primary key, about log2(rows) probes of one index page each (24 at 10 million rows).
   */
  async function firstIdArrivedAt(db: Queryable, at: Date): Promise<number> {
    const range = (await db.query<{ lo: number | null; hi: number | null }>(sql.ID_RANGE)).rows[0];
    if (!range || range.lo === null || range.hi === null) return 0;
    let lo = range.lo;
    let hi = range.hi + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const row = (await db.query<{ id: number; receivedAt: Date }>(sql.ARRIVAL_ID, [mid])).rows[0];
      // mutant: time-range-ids-inverted
      if (row === undefined || row.receivedAt >= at) hi = mid;
      else lo = row.id + 1;
    }
    return lo;
  }
  const GET_EVENT_SQL = prepared('getEvent', sql.GET_EVENT);

  async function getEvent(db: Queryable, rowId: number): Promise<EventRow | null> {
    const { rows } = await db.query<EventRow>(GET_EVENT_SQL([rowId]));
    return rows[0] ?? null;
  }

  return {
    /**
     * Re-drive: finish what was started, same generation (same keys, committed steps skipped);
     * `handler` null = every such run of the event. An event never dispatched is left to the
     * caller (it enqueues the dispatch). [] = nothing the action applies to.
     */
    async redriveRuns(db: Queryable, rowId: number, handler: string | null, actor: string, reason: string): Promise<MovedRun[]> {
      const { rows } = await db.query<MovedRow>(sql.REDRIVE_RUNS, [rowId, handler, actor, reason]);
      return rows.map((row) => moved(rowId, row));
    },

    /** Replay: a new generation of one finished run, the `reuse` steps copied. null = the run is not finished (or does not exist). */
    async replayRun(db: Queryable, input: { rowId: number; handler: string; reuse: string[]; actor: string; reason: string; detail: unknown }): Promise<MovedRun | null> {
      const { rows } = await db.query<MovedRow>(sql.REPLAY_RUN, [input.rowId, input.handler, input.reuse, input.actor, input.reason, JSON.stringify(input.detail)]);
      return rows[0] ? moved(input.rowId, rows[0]) : null;
    },

    /**
     * The search (EventFilter). An event id or a time range without a source is looked up
     * under every source stored, so the indexes that lead with the source (events_key,
     * events_provider_received_idx) can answer it.
     */
    async listEvents(db: Queryable, filter: EventFilter): Promise<EventSummary[]> {
      let sources = filter.source === undefined ? null : [filter.source];
      if (sources === null && filter.eventId !== undefined) sources = (await db.query<{ source: string }>(sql.SOURCES)).rows.map((r) => r.source);
      // A time range becomes a range of row ids too (ids follow arrival), so the primary key
      // reads only the rows of the range; received_at still decides exactly which match.
      const idFrom = filter.since === undefined ? null : await firstIdArrivedAt(db, new Date(filter.since.getTime() - ARRIVAL_SKEW_MS));
      const idTo = filter.until === undefined ? null : await firstIdArrivedAt(db, new Date(filter.until.getTime() + ARRIVAL_SKEW_MS));
      const { rows } = await db.query<SummaryRow>(sql.LIST_EVENTS, [
        filter.state ?? null,
        sources,
        filter.type ?? null,
        filter.olderThanSeconds ?? null,
        filter.handler ?? null,
        filter.limit ?? 50,
        filter.waiting ?? null,
        filter.eventId ?? null,
        filter.since ?? null,
        filter.until ?? null,
        filter.payload?.path ?? null,
        filter.payload?.op ?? null,
        filter.payload?.value ?? null,
        filter.group ?? null,
        filter.before ?? null,
        idFrom,
        idTo,
      ]);
      return rows.map(summary);
    },

    /** Failure groups, newest failure first; resolved ones only with `includeResolved`. */
    async failureGroups(db: Queryable, options: { handler?: string; limit?: number; includeResolved?: boolean } = {}): Promise<FailureGroup[]> {
      const { rows } = await db.query<FailureGroup>(sql.FAILURE_GROUPS, [options.handler ?? null, options.limit ?? 100, options.includeResolved === true]);
      return rows;
    },

    /** The reconciler leader's pass (in its transaction): closes the groups without failing runs, opens the new and returning ones. */
    async openFailureGroups(db: Queryable): Promise<OpenedGroup[]> {
      return (await db.query<OpenedGroup>(sql.OPEN_FAILURE_GROUPS)).rows;
    },

    /** Opened groups whose opening is not notified yet. */
    async unnotifiedFailureGroups(db: Queryable, limit: number, maxAttempts: number): Promise<{ id: string; handler: string; shape: string; openedAt: Date; runs: number }[]> {
      return (await db.query<{ id: string; handler: string; shape: string; openedAt: Date; runs: number }>(sql.UNNOTIFIED_GROUPS, [limit, maxAttempts])).rows;
    },

    /** Records one notification try of a group's opening (delivered or not). */
    async failureGroupNotifyTried(db: Queryable, group: { handler: string; shape: string; openedAt: Date }, delivered: boolean): Promise<void> {
      await db.query(sql.NOTIFY_TRIED, [group.handler, group.shape, group.openedAt, delivered]);
    },

    /** Marks a failure group resolved; null = no failed or retrying run is in such a group. */
    async resolveFailureGroup(db: Queryable, id: string, actor: string, reason: string): Promise<{ handler: string; shape: string; resolvedAt: Date } | null> {
      const { rows } = await db.query<{ handler: string; shape: string; resolvedAt: Date }>(sql.RESOLVE_GROUP, [id, actor, reason]);
      return rows[0] ?? null;
    },

    /** Runs that look stuck: processing past their lease, or received untouched for `receivedOlderThanMs`. */
    async listStuckRuns(db: Queryable, receivedOlderThanMs: number, limit: number): Promise<EventSummary[]> {
      const { rows } = await db.query<{ id: number }>(sql.STUCK_RUN_EVENT_IDS, [receivedOlderThanMs, limit]);
      if (rows.length === 0) return [];
      const { rows: events } = await db.query<SummaryRow>(sql.EVENTS_BY_IDS, [rows.map((r) => r.id)]);
      return events.map(summary);
    },

    /** The event with its runs, steps, operator actions, delivery log and attempts. */
    async showEvent(db: Queryable, rowId: number): Promise<EventDetail | null> {
      const event = await getEvent(db, rowId);
      if (!event) return null;
      const runs = await db.query<RunRow>(sql.GET_RUNS, [rowId]);
      const steps = await db.query<StepRecord>(sql.SHOW_STEPS, [rowId]);
      const actions = await db.query<OperatorAction>(sql.SHOW_ACTIONS, [rowId]);
      const deliveries = await db.query<DeliveryRecord>(sql.SHOW_DELIVERIES, [rowId]);
      const counted = await db.query<{ total: number; lastAt: Date | null }>(sql.SHOW_DELIVERY_TOTAL, [rowId]);
      const attempts = await db.query<AttemptRecord>(sql.SHOW_ATTEMPTS, [rowId]);
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
    },

    getEvent,

    /** A backfill run's operator action; its id. */
    async recordBackfill(db: Queryable, source: string, actor: string, what: string, counts: Record<string, number>): Promise<number> {
      return Number((await db.query<{ id: string }>(sql.RECORD_BACKFILL, [source, actor, what, JSON.stringify(counts)])).rows[0]!.id);
    },

    async getEventByKey(db: Queryable, source: string, eventId: string): Promise<EventRow | null> {
      const { rows } = await db.query<EventRow>(sql.GET_EVENT_BY_KEY, [source, eventId]);
      return rows[0] ?? null;
    },

    async getRuns(db: Queryable, rowId: number): Promise<RunRow[]> {
      return (await db.query<RunRow>(sql.GET_RUNS, [rowId])).rows;
    },

    /** Steps of one run and generation, in the order they completed. */
    async getSteps(db: Queryable, runId: number, generation: number): Promise<RecordedStep[]> {
      return (await db.query<RecordedStep>(sql.GET_STEPS, [runId, generation])).rows;
    },

    async pendingCounts(db: Queryable, staleAfterMs: number): Promise<PendingCounts> {
      return (await db.query<PendingCounts>(sql.PENDING_COUNTS, [staleAfterMs])).rows[0]!;
    },

    /** Upserts what a worker loaded, at its start. */
    /** Records what a worker ($worker) loaded: the registry, each handler's declared settings, and that this worker has it. */
    async registerHandlers(db: Queryable, worker: string, handlers: RegisteredHandler[]): Promise<void> {
      if (handlers.length === 0) return;
      await db.query(sql.REGISTER_HANDLERS, [
        handlers.map((h) => h.name),
        handlers.map((h) => h.source),
        handlers.map((h) => h.kind ?? null),
        handlers.map((h) => h.type),
        handlers.map((h) => h.description ?? null),
        handlers.map((h) => JSON.stringify(h.settings ?? {})),
        worker,
      ]);
    },

    /** Every handler and destination ever registered, with its settings and the workers seen with it within `seenWithinSeconds`. */
    async handlerRegistry(db: Queryable, seenWithinSeconds: number): Promise<RegistryEntry[]> {
      return (await db.query<RegistryEntry>(sql.HANDLER_REGISTRY, [seenWithinSeconds])).rows;
    },

    /** A worker's reconciler pass: it is still there. */
    async workerSeen(db: Queryable, worker: string): Promise<void> {
      await db.query(sql.WORKER_SEEN, [worker]);
    },

    /** A worker stopping (its name), or the leader forgetting workers unseen for a day (null). */
    async forgetWorkers(db: Queryable, worker: string | null): Promise<void> {
      await db.query(sql.FORGET_WORKERS, [worker]);
    },

    /** How each named handler or destination is doing (HANDLER_STATES). */
    async handlerStates(db: Queryable, names: string[]): Promise<HandlerState[]> {
      return (await db.query<HandlerState>(sql.HANDLER_STATES, [names])).rows;
    },

    async listHandlers(db: Queryable): Promise<{ name: string; source: string; kind: string | null; type: string; lastSeenAt: Date }[]> {
      return (await db.query<{ name: string; source: string; kind: string | null; type: string; lastSeenAt: Date }>(sql.LIST_HANDLERS)).rows;
    },
  };
}
