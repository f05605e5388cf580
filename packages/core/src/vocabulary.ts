/**
 * The engine's vocabulary: the states of events and runs, their rows, the queue's job, and the
 * words the code uses for things.
 *
 * Glossary
 * - delivery:   one HTTP request from a provider. A provider may deliver one event many times
 *               (retries, manual resends, concurrent duplicates).
 * - event:      the thing that happened at the provider, identified by a stable event id that
 *               is the same on every delivery of it. One row in `events`.
 * - source:     a configured sender (the `:source` in `/webhooks/:source`), e.g. `stripe`
 *               or `stripe-eu`; each is its own dedupe namespace. The one word in code, docs,
 *               logs, metric labels and answers; the `events` table's column keeps the name
 *               `provider` (docs/architecture.md says why).
 * - kind:       the signature scheme / provider family of a source (stripe, github, ...).
 * - event key:  (source, event id): what deduplicates. Unique in Postgres; queue job ids and
 *               outbound idempotency keys derive from it (event-key.ts).
 * - claim:      the INSERT ... ON CONFLICT DO NOTHING at the edge that makes the first
 *               delivery of an event the only one that creates work.
 * - handler:    a user's function for one (source, type), with a stable name (defineHandler).
 * - dispatch:   a worker creating an event's runs, one per handler registered for it.
 * - run:        one handler's processing of one event: its own state, lease, attempts,
 *               generation and steps. One row in `handler_runs`.
 * - lease:      (lease_token, lease_until) on a run in `processing`: the right of one worker
 *               to work on it until the lease expires. Renewed while the handler runs.
 * - fence:      the check of lease_token inside every transition and step transaction, so a
 *               worker whose lease was taken over can no longer commit anything.
 * - step:       a named recovery point of a run. A committed step is recorded and never
 *               re-run for the same generation; a resumed attempt gets its recorded result.
 * - effect:     what a handler does in the world (a ledger credit, a charge, an email).
 *               Exactly once per run and generation.
 * - generation: replay counter of a run. Step records and outbound idempotency keys are per
 *               generation; a deliberate replay starts a new one.
 * - re-drive:   an operator finishing a stuck or failed run: same generation, same keys.
 * - replay:     an operator re-running chosen steps of a finished run on purpose: new
 *               generation, new keys for those steps, recorded results reused for the rest.
 */

export type EventState = 'received' | 'processing' | 'done' | 'failed';
export const EVENT_STATES: readonly EventState[] = ['received', 'processing', 'done', 'failed'];

export type RunState = 'received' | 'processing' | 'done' | 'failed';
export const RUN_STATES: readonly RunState[] = ['received', 'processing', 'done', 'failed'];

export type StepKind = 'local' | 'external';

/** A row of `events`. */
export interface EventRow {
  id: number;
  source: string;
  kind: string;
  eventId: string;
  type: string;
  /** null when pruned by retention, or when `payloadUnreadable`. */
  payload: unknown;
  /**
   * The stored payload cannot be read safely (stored before the payload limits, it holds a
   * number no JavaScript number can hold): it is not returned, and a run of it is failed.
   */
  payloadUnreadable: boolean;
  signedAt: Date | null;
  meta: Record<string, string>;
  state: EventState;
  runsPending: number;
  runsFailed: number;
  note: string | null;
  receivedAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /** The traceparent of the delivery that created it, stored by the dispatch (tracing.ts); null when not traced. */
  traceParent: string | null;
  /** When retention deleted its payload, runs and steps (RETENTION_DAYS); the key stays until KEY_RETENTION_DAYS. */
  prunedAt: Date | null;
  /**
   * How it reached Oncehook: `delivery` (a webhook delivery whose signature verified) or
   * `backfill` (fetched from the provider's API by `oncehook backfill`: never delivered).
   */
  origin: EventOrigin;
  /** For a backfilled event: which backfill fetched it (its command line or schedule, who, when). */
  originDetail: string | null;
}

/** How an event reached Oncehook (EventRow.origin). */
export type EventOrigin = 'delivery' | 'backfill';

/** A row of `handler_runs`. */
export interface RunRow {
  id: number;
  eventRowId: number;
  handler: string;
  state: RunState;
  attempts: number;
  generation: number;
  /** 2: keys include the handler name; 1: carried over from before handler names. */
  keyScheme: 1 | 2;
  leaseToken: string | null;
  leaseUntil: Date | null;
  lastError: string | null;
  note: string | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  /** Why a `received` run has not started (flow control): its handler or source is paused, or it waits for a slot or the rate. */
  waiting: RunWaiting | null;
  waitingSince: Date | null;
  /** Bumped by each wait and wake-up; a job carrying an older value is stale (migration 0010). */
  waits: number;
}

export type RunWaiting = 'paused' | 'concurrency' | 'rate-limit';

/** A job's options, as Oncehook gives them to the queue on either store (queue.ts, postgres-queue.ts). */
export interface EventJobOptions {
  jobId: string;
  delay?: number;
  priority?: number;
  lifo?: boolean;
}

/**
 * The payload of a BullMQ job: just enough to find the rows. Postgres is the truth.
 * Without `handler` it is a dispatch job (create the event's runs and run them); with it, a
 * job for that handler's run.
 */
export interface EventJobData {
  rowId: number;
  /** The event's source (jobs added before this release name it `provider`: readJobData). */
  source: string;
  eventId: string;
  handler?: string;
  /**
   * A dispatch job's event kind and type, so the worker matches handlers without reading the
   * event first (one statement less per event). Absent in jobs from older versions: the worker
   * then reads the event.
   */
  kind?: string;
  type?: string;
  /**
   * A run job's generation (replays start a new one). Part of the job id from generation 1 on,
   * so a replayed run's attempts never collide with the ids of its earlier generation's jobs,
   * which Redis may still keep (completed jobs are kept for Bull Board). Absent = 0.
   */
  generation?: number;
  /**
   * A dispatch job's W3C traceparent: the delivery that created the event (tracing.ts). The
   * dispatch stores it on the event row, where every later lease (retries, recoveries) reads
   * it. Absent when not traced.
   */
  trace?: string;
  /** The run's attempt count when the job was enqueued: the job runs attempt + 1 (0 for a dispatch). */
  attempt: number;
  /**
   * A run job scheduled by flow control (a wait for a slot or the rate, a wake-up, a resume):
   * the run's `waits` then. Part of the job id; a job whose value is not the run's current one
   * is stale and may not schedule another (one chain of jobs per waiting run).
   */
  wait?: number;
}

/**
 * A job's data as this version reads it. A job added by the release before names its source
 * `provider`: still read for this release (it may wait in the queue across an upgrade), then
 * no longer (CHANGELOG.md).
 */
export function readJobData(data: EventJobData | (Omit<EventJobData, 'source'> & { provider: string })): EventJobData {
  // mutant: old-job-source-unread
  if ('source' in data && typeof data.source === 'string') return data;
  const { provider, ...rest } = data as Omit<EventJobData, 'source'> & { provider: string };
  return { ...rest, source: provider };
}
