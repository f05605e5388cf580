/**
 * What an operator can do to events: list, show, re-drive, replay, bulk re-drive with a dry
 * run. Shared by the CLI (`npm run oncehook`) and the admin HTTP API in ingest.
 *
 * - re-drive: finish what was started. Same generation, so committed steps are skipped and
 *   external steps that run again send the same outbound keys: no second effect.
 * - replay: do chosen steps again, on purpose, as a new generation of one handler's run.
 *   `steps` names the steps to run again (each external one gets a new key, so the API applies
 *   it once more); every other recorded step is reused (its recorded result handed back, its
 *   effect not repeated). `allSteps` re-runs everything, local writes included, and must be
 *   asked for explicitly. `dryRun` returns the plan and changes nothing.
 * Neither ever touches a run a worker holds a live lease on (guarded UPDATEs).
 * - pause / resume: a handler or a source (flow-control.ts); recorded as operator actions.
 */
import { cancelOnAbort, PG_QUERY_CANCELED, sourceFields, withTransaction, type Pool } from '@oncehook/shared';
import type { EventJobData, EventRow, RunRow, StepKind } from './vocabulary.js';
import type { ActivityRow, RegistryEntry, EventDetail, EventFilter, EventSummary, FailureGroup, HandlerState, MovedRun, PauseRow, Queries, RecordedStep } from './store/queries.js';
import { idempotencyKeyFor } from './idempotency-key.js';
import { viewPayload } from './payload-view.js';
import { enqueueEvent, type JobTarget } from './queue.js';

export interface RedriveResult {
  ok: true;
  rowId: number;
  /** The runs moved back to received (none when the event itself was never dispatched). */
  runs: { handler: string; fromState: string; generation: number }[];
  /** The event had never been dispatched: its dispatch was enqueued again. */
  dispatch?: boolean;
}

export interface Refusal {
  ok: false;
  rowId: number;
  reason: string;
}

export interface ReplayOptions {
  /** Which handler's run; needed when the event has runs of several handlers. */
  handler?: string;
  /** Run these recorded steps again (new keys); reuse every other recorded step. */
  steps?: string[];
  /** Run every step again, local writes included. */
  allSteps?: boolean;
  /** Return the plan; change nothing. */
  dryRun?: boolean;
}

export interface ReplayPlan {
  rowId: number;
  handler: string;
  fromState: string;
  /** The generation being replayed, and the new one. */
  generation: number;
  nextGeneration: number;
  /** Steps that run again; external ones with the new key the API will see. */
  rerun: { name: string; kind: StepKind | null; idempotencyKey: string | null }[];
  /** Steps whose recorded result is handed back, not run again. */
  reuse: { name: string; kind: StepKind | null }[];
  /** Local steps among `rerun`: their database writes apply again. */
  localRerun: string[];
}

export type ReplayResult = { ok: true; dryRun: boolean; plan: ReplayPlan } | Refusal;

/** What pause and resume apply to: one handler (by name) or one source (every handler's runs of its events). */
export interface PauseTarget {
  scope: 'handler' | 'source';
  name: string;
}

export type PauseResult = { ok: true; pause: PauseRow; alreadyPaused: boolean } | { ok: false; reason: string };
export type ResumeResult = { ok: true; resumed: PauseRow; released: number; enqueueFailed: number } | { ok: false; reason: string };

/** Runs released per statement by a resume (each batch then enqueued). */
const RESUME_BATCH = 500;

export interface Operations {
  /**
   * Pauses a handler or a source: deliveries are still verified, claimed and answered 2xx; no
   * new run of it starts (runs in progress finish; with `now`, they stop at their next step
   * boundary and wait too); its runs wait, marked `paused`. State in Postgres: it holds for
   * every worker, now and started later, until resumed.
   */
  pause(target: PauseTarget, actor: string, reason: string, options?: { now?: boolean }): Promise<PauseResult>;
  /** Ends a pause; the runs waiting for it are enqueued and start under their handler's limits. */
  resume(target: PauseTarget, actor: string, reason: string): Promise<ResumeResult>;
  /** Everything paused, with how many runs wait for each. */
  pauses(): Promise<PauseRow[]>;
  /** How each named handler or destination is doing now (in flight, waiting, dead letters, paused, last error). */
  handlerStates(names: string[]): Promise<HandlerState[]>;
  /**
   * The events matching the filter, newest first (EventFilter), within SEARCH_TIMEOUT_MS:
   * a search that would take longer (a rare payload value over millions of events) throws
   * SearchTooSlowError instead of holding a connection.
   */
  list(filter: EventFilter, options?: SearchOptions): Promise<WithSourceAlias<EventSummary>[]>;
  /** Every registered handler and destination, with its declared settings and the workers seen with it within `seenWithinSeconds`. */
  handlers(seenWithinSeconds: number): Promise<RegistryEntry[]>;
  /** The stored activity minutes of the last `seconds` (the Activity page). */
  activity(seconds: number): Promise<ActivityRow[]>;
  /** Failed and retrying runs grouped by handler and error shape, newest failure first. */
  failureGroups(options?: { handler?: string; limit?: number; includeResolved?: boolean }): Promise<FailureGroup[]>;
  /** Marks a failure group resolved (hidden until a run of it fails again); refused when no run is in it. */
  resolveFailureGroup(id: string, actor: string, reason: string): Promise<{ ok: true; handler: string; shape: string; resolvedAt: Date } | { ok: false; reason: string }>;
  /** The event and its history; its payload bounded for display (EventView). */
  show(ref: string | number): Promise<EventView | null>;
  redrive(rowId: number, options: { handler?: string }, actor: string, reason: string): Promise<RedriveResult | Refusal>;
  replay(rowId: number, options: ReplayOptions, actor: string, reason: string): Promise<ReplayResult>;
  /** Re-drives every event matching the filter (default: failed); with dryRun, changes nothing. */
  bulkRedrive(
    filter: EventFilter,
    options: { dryRun: boolean; actor: string; reason: string } & SearchOptions,
  ): Promise<{ dryRun: boolean; matched: number; results: (RedriveResult | Refusal | { ok: true; rowId: number; dryRun: true })[] }>;
}

/**
 * An event as operators see it. `event.payload` is the payload only when it is shallow enough
 * for any JSON printer (else null); `payloadView` is its text, cut at MAX_VIEW_CHARS.
 */
/**
 * An operator's view of a row with a source: `provider` is `source` under its name before, kept
 * in the admin's and the CLI's JSON for one release (CHANGELOG.md).
 */
export type WithSourceAlias<T> = T & {
  /** @deprecated `source`; removed in the next release. */
  provider: string;
};

export interface EventView extends Omit<EventDetail, 'event'> {
  event: WithSourceAlias<EventRow>;
  payloadView: { text: string; truncated: boolean };
}

/** How a search runs: `signal` aborts it in Postgres (a cancel request) when its client goes away. */
export interface SearchOptions {
  signal?: AbortSignal;
}

/** A row id, or `source/event_id`. */
export async function resolveEventRef(pool: Pool, queries: Queries, ref: string | number): Promise<number | null> {
  if (typeof ref === 'number') return ref;
  if (/^\d{1,16}$/.test(ref) && Number(ref) <= Number.MAX_SAFE_INTEGER) return Number(ref);
  const slash = ref.indexOf('/');
  if (slash <= 0) return null;
  const row = await queries.getEventByKey(pool, ref.slice(0, slash), ref.slice(slash + 1));
  return row?.id ?? null;
}

function describeRun(run: RunRow): string {
  if (run.state === 'processing') return `handler "${run.handler}" is being run by a worker (lease until ${run.leaseUntil?.toISOString()})`;
  return `handler "${run.handler}" is ${run.state}`;
}

/** A handler or source name as defineHandler and the sources allow; null when it is one. */
function targetProblem(target: PauseTarget): string | null {
  if (target.scope !== 'handler' && target.scope !== 'source') return `pause applies to a handler or a source, not "${String(target.scope)}"`;
  if (typeof target.name !== 'string' || !/^[a-z0-9][a-z0-9._-]{0,62}$/.test(target.name))
    return `"${String(target.name)}" is not a ${target.scope} name (1-63 characters of a-z 0-9 . _ -)`;
  return null;
}

/** Why an event whose payload retention deleted cannot run again. */
function prunedReason(prunedAt: Date): string {
  return `retention deleted this event's payload, runs and steps on ${prunedAt.toISOString()} (RETENTION_DAYS); only its key is kept (KEY_RETENTION_DAYS), so it cannot run again`;
}

type OperationsDeps = { pool: Pool; queries: Queries; queue: JobTarget; searchTimeoutMs?: number };

export function createOperations(deps: OperationsDeps): Operations {
  const { pool, queries } = deps;
  const operations: Operations = {
    pause: (target, actor, reason, options = {}) => pauseTarget(deps, target, actor, reason, options.now === true),
    resume: (target, actor, reason) => resumeTarget(deps, target, actor, reason),
    pauses: () => queries.listPauses(pool),
    handlerStates: (names) => queries.handlerStates(pool, names),
    list: (filter, options = {}) => searchEvents(deps, filter, options.signal),
    failureGroups: (options) => queries.failureGroups(pool, options),
    activity: (seconds) => queries.readActivity(pool, seconds),
    handlers: (seenWithinSeconds) => queries.handlerRegistry(pool, seenWithinSeconds),
    async resolveFailureGroup(id, actor, reason) {
      const resolved = await queries.resolveFailureGroup(pool, id, actor, reason);
      return resolved
        ? { ok: true, ...resolved }
        : { ok: false, reason: `no failed or retrying run is in failure group ${id} (its runs were re-driven and succeeded, or the id is wrong)` };
    },
    show: (ref) => showEvent(deps, ref),
    redrive: (rowId, options, actor, reason) => redriveEvent(deps, rowId, options.handler, actor, reason),
    replay: (rowId, options, actor, reason) => replayEvent(deps, rowId, options, actor, reason),
    async bulkRedrive(filter, options) {
      const matching = await searchEvents(deps, { ...filter, state: filter.state ?? 'failed', limit: filter.limit ?? 1000 }, options.signal);
      if (options.dryRun) return { dryRun: true, matched: matching.length, results: matching.map((e) => ({ ok: true as const, rowId: e.id, dryRun: true as const })) };
      const results: (RedriveResult | Refusal)[] = [];
      for (const event of matching) results.push(await redriveEvent(deps, event.id, filter.handler, options.actor, options.reason));
      return { dryRun: false, matched: matching.length, results };
    },
  };
  return operations;
}

/** How long one search may run before it is refused as too slow (a statement timeout of its own transaction); the admin passes ADMIN_STATEMENT_TIMEOUT_MS. */
export const SEARCH_TIMEOUT_MS = 10_000;

/** A search that would have taken longer than its timeout: narrow it. */
export class SearchTooSlowError extends Error {
  override name = 'SearchTooSlowError';
  constructor(timeoutMs = SEARCH_TIMEOUT_MS) {
    super(
      `the search took longer than ${timeoutMs / 1000} s and was stopped: narrow it with a time range (since/until), a source, a type or a handler (a payload search reads every event the other filters leave, newest first)`,
    );
  }
}

/** The search's client went away: the statement was cancelled in Postgres, nobody waits for an answer. */
export class SearchAbandonedError extends Error {
  override name = 'SearchAbandonedError';
}

async function searchEvents(
  { pool, queries, searchTimeoutMs = SEARCH_TIMEOUT_MS }: OperationsDeps,
  filter: EventFilter,
  signal?: AbortSignal,
): Promise<WithSourceAlias<EventSummary>[]> {
  if (signal?.aborted) throw new SearchAbandonedError('the search was abandoned by its client before it started');
  try {
    return await withTransaction(pool, async (tx) => {
      // SET LOCAL: the timeout ends with this transaction, the pooled connection keeps its own.
      await tx.query(`SET LOCAL statement_timeout = ${Math.trunc(searchTimeoutMs)}`);
      // The client gone (a closed tab, a reload): Postgres is told to stop the statement now.
      // mutant: admin-search-not-cancelled
      const unwatch = cancelOnAbort(tx, signal);
      try {
        return (await queries.listEvents(tx, filter)).map((event) => ({ ...event, ...sourceFields(event.source) }));
      } finally {
        unwatch();
      }
    });
  } catch (error) {
    if ((error as { code?: string }).code === PG_QUERY_CANCELED)
      throw signal?.aborted ? new SearchAbandonedError('the search was cancelled: its client went away') : new SearchTooSlowError(searchTimeoutMs);
    throw error;
  }
}

async function enqueueMoved(queue: JobTarget, moved: MovedRun[]): Promise<void> {
  for (const m of moved) await enqueueEvent(queue, m.job, { replaceFinished: true });
}

/** The run an operator's action on `rowId` is about: the handler's, or the only one. */
async function pickRun({ pool, queries }: OperationsDeps, rowId: number, handler: string | undefined): Promise<RunRow | string> {
  const runs = await queries.getRuns(pool, rowId);
  if (runs.length === 0) return `event ${rowId} has no handler runs (it was not dispatched, or no handler was registered for it)`;
  if (handler !== undefined)
    return runs.find((r) => r.handler === handler) ?? `event ${rowId} has no run of handler "${handler}" (it has: ${runs.map((r) => r.handler).join(', ')})`;
  if (runs.length > 1) return `event ${rowId} has runs of ${runs.length} handlers (${runs.map((r) => r.handler).join(', ')}); say which one (--handler / "handler")`;
  return runs[0]!;
}

async function pauseTarget({ pool, queries }: OperationsDeps, target: PauseTarget, actor: string, reason: string, now: boolean): Promise<PauseResult> {
  const problem = targetProblem(target);
  if (problem) return { ok: false, reason: problem };
  const pause = await queries.pause(pool, target.scope, target.name, actor, reason, now);
  if (pause) {
    const { created, ...row } = pause;
    return { ok: true, pause: row, alreadyPaused: !created };
  }
  const existing = (await queries.listPauses(pool)).find((p) => p.scope === target.scope && p.name === target.name);
  return existing ? { ok: true, pause: existing, alreadyPaused: true } : { ok: false, reason: `${target.scope} "${target.name}" changed meanwhile; look again` };
}

async function resumeTarget({ pool, queries, queue }: OperationsDeps, target: PauseTarget, actor: string, reason: string): Promise<ResumeResult> {
  const problem = targetProblem(target);
  if (problem) return { ok: false, reason: problem };
  // The pause goes and every run no pause covers any longer is released, in ONE transaction
  // (a reconciler pass cannot release them in between, so the count is this resume's); their
  // jobs are enqueued after the commit. If this process dies before that, the runs are
  // `received` with no job: the reconciler re-enqueues them after REQUEUE_AFTER_MS.
  const done = await withTransaction(pool, async (tx) => {
    const resumed = await queries.resume(tx, target.scope, target.name, actor, reason);
    if (!resumed) return null;
    const jobs: EventJobData[] = [];
    for (;;) {
      const batch = await queries.releasePaused(tx, RESUME_BATCH);
      jobs.push(...batch);
      if (batch.length < RESUME_BATCH) break;
    }
    return { resumed, jobs };
  });
  if (!done) return { ok: false, reason: `${target.scope} "${target.name}" is not paused (oncehook paused lists what is)` };
  let enqueueFailed = 0;
  for (let i = 0; i < done.jobs.length; i += RESUME_BATCH) {
    const results = await Promise.allSettled(done.jobs.slice(i, i + RESUME_BATCH).map((job) => enqueueEvent(queue, job, { replaceFinished: true })));
    enqueueFailed += results.filter((r) => r.status === 'rejected').length;
  }
  return { ok: true, resumed: done.resumed, released: done.jobs.length, enqueueFailed };
}

async function showEvent({ pool, queries }: OperationsDeps, ref: string | number): Promise<EventView | null> {
  const rowId = await resolveEventRef(pool, queries, ref);
  const detail = rowId === null ? null : await queries.showEvent(pool, rowId);
  if (!detail) return null;
  // Bounded, whatever is stored (payload-view.ts): the payload itself only when any printer
  // can take it, and its text for people.
  const view = detail.event.payloadUnreadable
    ? {
        text: '(not shown: stored before the payload limits, it holds a number outside the range of a JavaScript number; printed in full it can take hundreds of MB)',
        truncated: true,
        value: undefined,
      }
    : viewPayload(detail.event.payload);
  return { ...detail, event: { ...detail.event, ...sourceFields(detail.event.source), payload: view.value ?? null }, payloadView: { text: view.text, truncated: view.truncated } };
}

async function redriveEvent(deps: OperationsDeps, rowId: number, handler: string | undefined, actor: string, reason: string): Promise<RedriveResult | Refusal> {
  const { pool, queries, queue } = deps;
  const event = await queries.getEvent(pool, rowId);
  if (!event) return { ok: false, rowId, reason: `no event with row id ${rowId}` };
  if (event.prunedAt) return { ok: false, rowId, reason: prunedReason(event.prunedAt) };
  if (event.state === 'received') {
    // Never dispatched: nothing to move, just make sure its dispatch is queued.
    await enqueueEvent(queue, { rowId, source: event.source, eventId: event.eventId, kind: event.kind, type: event.type, attempt: 0 }, { replaceFinished: true });
    return { ok: true, rowId, runs: [], dispatch: true };
  }
  const moved = await queries.redriveRuns(pool, rowId, handler ?? null, actor, reason);
  if (moved.length === 0) {
    const runs = await queries.getRuns(pool, rowId);
    const relevant = handler ? runs.filter((r) => r.handler === handler) : runs;
    if (relevant.length === 0) return { ok: false, rowId, reason: handler ? `event ${rowId} has no run of handler "${handler}"` : `event ${rowId} has no handler runs` };
    return { ok: false, rowId, reason: `nothing to re-drive: ${relevant.map(describeRun).join('; ')}; re-drive applies to failed, received or stuck (lease expired) runs` };
  }
  await enqueueMoved(queue, moved);
  return { ok: true, rowId, runs: moved.map((m) => ({ handler: m.handler, fromState: m.fromState, generation: m.generation })) };
}

/**
 * Replay: a finished run runs again as a new generation; the chosen steps run again (external
 * ones under new keys, since the downstream would answer the old key with the old result), the
 * others' records are reused. Checked first (the event kept its payload, the run is finished,
 * the steps named exist), planned (replayPlan), and with dryRun only shown.
 */
async function replayEvent(deps: OperationsDeps, rowId: number, options: ReplayOptions, actor: string, reason: string): Promise<ReplayResult> {
  const { pool, queries } = deps;
  const event = await queries.getEvent(pool, rowId);
  if (!event) return { ok: false, rowId, reason: `no event with row id ${rowId}` };
  // mutant: pruned-event-replayed
  if (event.prunedAt) return { ok: false, rowId, reason: prunedReason(event.prunedAt) };
  const run = await pickRun(deps, rowId, options.handler);
  if (typeof run === 'string') return { ok: false, rowId, reason: run };
  if (run.state !== 'done' && run.state !== 'failed') {
    return { ok: false, rowId, reason: `${describeRun(run)}; replay applies to done or failed runs (use re-drive to finish one)` };
  }
  const recorded: RecordedStep[] = await queries.getSteps(pool, run.id, run.generation);
  const rerunNames = chooseRerun(recorded, options, run);
  if (typeof rerunNames === 'string') return { ok: false, rowId, reason: rerunNames };
  const plan = replayPlan(rowId, event, run, recorded, rerunNames);
  if (options.dryRun) return { ok: true, dryRun: true, plan };
  const moved = await queries.replayRun(pool, {
    rowId,
    handler: run.handler,
    reuse: plan.reuse.map((s) => s.name),
    actor,
    reason,
    detail: { rerun: plan.rerun.map((s) => s.name), reuse: plan.reuse.map((s) => s.name), allSteps: options.allSteps === true },
  });
  if (!moved) return { ok: false, rowId, reason: `handler "${run.handler}" changed state meanwhile; look again` };
  await enqueueMoved(deps.queue, [moved]);
  return { ok: true, dryRun: false, plan };
}

/** The names of the steps to run again (the operator's choice, checked), or why it cannot be. */
function chooseRerun(recorded: RecordedStep[], options: ReplayOptions, run: RunRow): string[] | string {
  const names = recorded.map((s) => s.name);
  const chosen = options.steps?.map((s) => s.trim()).filter(Boolean) ?? [];
  if (options.allSteps && chosen.length > 0) return 'give either steps or allSteps, not both';
  if (!options.allSteps && chosen.length === 0) {
    return `say which steps to run again: steps (recorded: ${names.join(', ') || 'none'}), or allSteps to run every step again, local writes included`;
  }
  const unknown = chosen.filter((name) => !names.includes(name));
  if (unknown.length > 0) {
    return `no recorded step named ${unknown.map((n) => `"${n}"`).join(', ')} in generation ${run.generation} of handler "${run.handler}" (recorded: ${names.join(', ') || 'none'})`;
  }
  return options.allSteps ? names : chosen;
}

/** What a replay will do: which steps run again (with the keys their external calls will carry) and which records are reused. */
function replayPlan(rowId: number, event: { source: string; eventId: string }, run: RunRow, recorded: RecordedStep[], rerunNames: string[]): ReplayPlan {
  const nextGeneration = run.generation + 1;
  const keyOf = (step: RecordedStep) =>
    step.kind === 'local'
      ? null
      : idempotencyKeyFor({
          source: event.source,
          eventId: event.eventId,
          handler: run.handler,
          step: step.name,
          generation: nextGeneration,
          keyScheme: run.keyScheme,
          subject: step.keySubject,
        });
  return {
    rowId,
    handler: run.handler,
    fromState: run.state,
    generation: run.generation,
    nextGeneration,
    rerun: recorded.filter((s) => rerunNames.includes(s.name)).map((s) => ({ name: s.name, kind: s.kind, idempotencyKey: keyOf(s) })),
    reuse: recorded.filter((s) => !rerunNames.includes(s.name)).map((s) => ({ name: s.name, kind: s.kind })),
    localRerun: recorded.filter((s) => rerunNames.includes(s.name) && s.kind !== 'external').map((s) => s.name),
  };
}
