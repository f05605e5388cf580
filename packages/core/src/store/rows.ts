/**
 * The shapes the store's statements return, and their decoding (timestamps that json_agg and
 * row_to_json hand back as strings).
 */
import type { EventJobData, EventRow, EventState, RunRow, RunState, RunWaiting, StepKind } from '../vocabulary.js';

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
  /**
   * The event was fetched from the provider's API by a backfill, not delivered: a new event is
   * recorded with origin `backfill` and this detail (which backfill), and nothing goes to the
   * delivery log (there was no delivery). The claim is otherwise the same statement, on the same
   * unique keys: an event already delivered is a duplicate.
   */
  backfill?: { detail: string };
}

/** pg reads query_timeout from a query's config too; its types list it on connections only. */
export function readTimeout(options: ClaimOptions): { query_timeout?: number } {
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
  /**
   * `performance.now()` taken before the statement (or transaction) that took the lease was
   * sent: the lease runs out no earlier than this plus LEASE_MS, on the server's clock too
   * (lease-clock.ts). Measured here, no clock of two hosts is compared.
   */
  leasedAt: number;
}

export type OperatorMode = 'redrive' | 'replay';

/** A condition on one field of the payload (the console's and `oncehook list --payload`'s search). */
export interface PayloadMatch {
  /** Keys from the payload's root (`["data", "object", "customer"]`; an array index is its number); empty = the whole payload's text. */
  path: string[];
  /** `equals`: the field's text is the value (a number matches its digits); `contains`: the text contains it, any case. */
  op: 'equals' | 'contains';
  value: string;
}

/**
 * Which events to list (every field optional; all given must hold). Newest first by arrival
 * (row id), `before` continues after the last row of a page (keyset: a page never shifts when
 * events arrive meanwhile).
 */
export interface EventFilter {
  state?: EventState;
  /** Events with a run waiting for this (flow control): paused, concurrency, rate-limit. */
  waiting?: RunWaiting;
  source?: string;
  type?: string;
  /** Events with a run of this handler (or destination). */
  handler?: string;
  /** The provider's event id, exactly as stored (`evt_...`; GitHub: `<hook id>:<delivery>`). */
  eventId?: string;
  /** Received at or after this. */
  since?: Date;
  /** Received before this. */
  until?: Date;
  /** Only events received at least this many seconds ago. */
  olderThanSeconds?: number;
  payload?: PayloadMatch;
  /** Events with a failed or retrying run in this failure group (FailureGroup.id). */
  group?: string;
  /** Rows with a smaller id than this: the next page after a page ending at this row. */
  before?: number;
  limit?: number;
}

/**
 * Failed and retrying runs of one handler whose last errors have one shape (the message with
 * ids, uuids and numbers other than a status code replaced: migrations/0012).
 */
export interface FailureGroup {
  /** 12 hex digits of the handler and the shape: stable while they are. */
  id: string;
  handler: string;
  shape: string;
  /** Runs in it that failed for good (dead letters). */
  failed: number;
  /** Runs in it that will be tried again. */
  retrying: number;
  /** The earliest and latest last failure of its runs. */
  firstSeen: Date;
  lastSeen: Date;
  /** The event of its latest failure, and that failure's message as recorded. */
  sampleEvent: number;
  sampleError: string;
  /** Set when an operator marked it resolved; `resolved` while no run has failed since. */
  resolvedAt: Date | null;
  resolvedBy: string | null;
  resolution: string | null;
  resolved: boolean;
}

/** A failure group the reconciler leader's pass opened (new, or failing again after it closed or was resolved). */
export interface OpenedGroup {
  id: string;
  handler: string;
  shape: string;
  openedAt: Date;
  runs: number;
  sampleEvent: number;
  sampleError: string | null;
}

/** What a worker records of a handler it loaded. */
export interface RegisteredHandler {
  name: string;
  source: string;
  kind: string | undefined;
  type: string;
  description: string | undefined;
  /** What it declares: limits, retries, priority (JSON; functions as "by key"). */
  settings?: Record<string, unknown>;
}

/** A handler (or destination) as the registry knows it. */
export interface RegistryEntry {
  name: string;
  source: string;
  kind: string | null;
  type: string;
  description: string | null;
  settings: Record<string, unknown> | null;
  firstSeenAt: Date;
  lastSeenAt: Date;
  /** Workers that loaded it and were seen lately. */
  workers: string[];
}

export interface RunSummary {
  id: number;
  handler: string;
  state: RunState;
  attempts: number;
  generation: number;
  lastError: string | null;
  updatedAt: Date;
  /** Why a received run has not started (flow control): paused, concurrency, rate-limit. */
  waiting: RunWaiting | null;
}

export interface EventSummary {
  id: number;
  source: string;
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
  /**
   * How a duplicate was recognised: `id`, the provider's id of an event already claimed (a
   * redelivery: the usual case); `body`, the same body as a claimed event under another id (body
   * dedupe, docs/providers.md). Null for the delivery that created the event.
   */
  matchedBy: 'id' | 'body' | null;
  /** @deprecated `matchedBy === 'body'`; kept for one release (CHANGELOG.md). It said `false` for an identical redelivery, which read as "another body". */
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

// json_agg / row_to_json hand back timestamps as strings: revive them.
const dateOrNull = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(value as string));

export function reviveEvent(raw: EventRow): EventRow {
  return {
    ...raw,
    signedAt: dateOrNull(raw.signedAt),
    receivedAt: new Date(raw.receivedAt),
    updatedAt: new Date(raw.updatedAt),
    finishedAt: dateOrNull(raw.finishedAt),
    prunedAt: dateOrNull(raw.prunedAt),
  };
}

export function reviveRun(raw: RunRow): RunRow {
  return {
    ...raw,
    leaseUntil: dateOrNull(raw.leaseUntil),
    createdAt: new Date(raw.createdAt),
    updatedAt: new Date(raw.updatedAt),
    finishedAt: dateOrNull(raw.finishedAt),
    waitingSince: dateOrNull(raw.waitingSince),
  };
}

/** A handler's (or destination's) state now. */
export interface HandlerState {
  handler: string;
  inFlight: number;
  waiting: number;
  failed: number;
  /** The pause's reason, when paused. */
  paused: string | null;
  lastError: string | null;
}
