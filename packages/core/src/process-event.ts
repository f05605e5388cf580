/**
 * The state machine, run once per job: a dispatch job creates an event's runs (one per
 * handler, already leased: dispatch-batcher.ts) and runs them; a run job runs one handler's
 * run. A run is leased (or waits: paused, over a limit, lower priority: flow-control.ts), its
 * handler runs with fenced steps while the lease is renewed, and it ends done, retried, failed
 * or with its lease lost (then it commits nothing more). Each transition and why:
 * docs/architecture.md, "Events, handler runs and the state machine".
 */
import { randomUUID } from 'node:crypto';
import { SpanStatusCode } from '@opentelemetry/api';
import { contextFrom, describeError, inSpan, tracer, type Faults, type Logger, type Pool } from '@oncehook/shared';
import type { EventJobData, EventRow, RunWaiting } from './vocabulary.js';
import { isLeaseLostError, LeaseLostError, type Handler, type HandlerEvent } from '@oncehook/sdk';
import type { LeasedRun, Queries, GateRequest } from './store/queries.js';
import { attemptsExhausted, policyFor, retryDelayMs, type RetryPolicy, verdictFor, verdictForProblem } from './retry-policy.js';
import { createRunContext, RunStoppedError, type RunContext } from './handler-context.js';
import type { EngineEvents } from './engine-events.js';
import { keepLease } from './lease-keeper.js';
import type { DispatchBatcher } from './dispatch-batcher.js';
import type { RunBatchers } from './run-batchers.js';
import type { HandlerRegistry } from './registry.js';
import { gateRequest, isGated, needsEvent, priorityLevel, rateWaitMs } from './flow-control.js';

export interface ProcessSettings {
  leaseMs: number;
  /** How many attempts, what an error means, how long the next one waits (retry-policy.ts). */
  retry: RetryPolicy;
  /** UNHANDLED_EVENTS: what an event without any handler becomes. */
  unhandled: 'done' | 'fail';
}

export interface ProcessDeps {
  pool: Pool;
  queries: Queries;
  registry: HandlerRegistry;
  /** Dispatches through group commit (dispatch-batcher.ts), on `pool`. */
  dispatcher: DispatchBatcher;
  /** The run statements group-committed across runs: done, lease proofs, records (run-batchers.ts), on `pool`. */
  batched: RunBatchers;
  log: Logger;
  faults: Faults;
  settings: ProcessSettings;
  /** The engine's observation surface (engine-events.ts): metrics, logs and probes listen there. */
  events: EngineEvents;
}

export type RunOutcome =
  | { kind: 'done'; handler: string; type: string }
  | { kind: 'failed'; handler: string; type: string; error: string }
  /** Recorded on the run (state received); the caller schedules job attempt `attempt` + 1. */
  /** `delayMs`: before the next attempt, from the handler's retry policy. */
  | { kind: 'retry'; handler: string; type: string; error: string; attempt: number; generation: number; delayMs: number; priority?: number }
  | { kind: 'lease-lost'; handler: string; type: string }
  /** Not ours to run (finished, or leased by another worker): acknowledged, nothing done. */
  | { kind: 'skipped'; handler: string }
  /** Not started: paused (the resume enqueues it), or over a limit (its next job is in `follow`). Not an attempt. */
  | { kind: 'waiting'; handler: string; reason: RunWaiting }
  /** A lower-priority handler's run, handed to a prioritized job of its own (in `follow`). */
  | { kind: 'deferred'; handler: string };

/** A job the caller enqueues after this one: a waiting run's next look, a wake-up, a deferred run. */
export interface FollowUp {
  job: EventJobData;
  delayMs?: number;
  priority?: number;
  /** At the front of the queue: a wake-up for a slot that is free now (the slot waits for it). */
  lifo?: boolean;
  /**
   * A wake-up whose run is leased already (asked for with `leaseWakeUp`): the caller runs it at
   * once (runHandedOver), never enqueues it (its job would find the run leased and do nothing;
   * the run would wait for its lease to run out).
   */
  handedOver?: HandedOverRun;
}

/** A woken run leased in its wake-up (sql LEASE_NEXT_WAITER), with what runHandedOver needs. */
export interface HandedOverRun {
  leased: LeasedRun;
  token: string;
  /** The slot's concurrency key (the run's own). */
  flowKey: string | null;
}

/** How the caller runs a job (processJob). */
export interface JobOptions {
  /**
   * The caller runs the run a freed slot wakes at once, in this job (event-worker.ts): the
   * wake-up leases it (one statement for the wake-up and the woken run's gate), and its
   * follow-up carries the lease (`handedOver`). At most one per job; other wake-ups are jobs.
   */
  leaseWakeUp?: boolean;
}

/** One job's follow-ups, and whether its next wake-up may be leased (JobOptions.leaseWakeUp, taken once). */
interface JobScope {
  follow: FollowUp[];
  leaseWakeUp: boolean;
}

export type JobOutcome =
  /** `follow`: the jobs to enqueue now (lost ones are found again by the reconciler). */
  { kind: 'runs'; source: string; runs: RunOutcome[]; follow: FollowUp[] } | { kind: 'unhandled'; source: string; type: string; state: 'done' | 'failed' } | { kind: 'skipped' };

export async function processJob(deps: ProcessDeps, job: EventJobData, options: JobOptions = {}): Promise<JobOutcome> {
  const scope: JobScope = { follow: [], leaseWakeUp: options.leaseWakeUp === true };
  if (job.handler !== undefined) {
    return { kind: 'runs', source: job.source, runs: [await runJob(deps, job, job.handler, null, scope)], follow: scope.follow };
  }
  return dispatch(deps, job, scope);
}

/**
 * A run leased in its wake-up (FollowUp.handedOver), run now: the rest of what its job would
 * have done after its gate (gatedRun), its own freed slot handed over in turn.
 */
export async function runHandedOver(deps: ProcessDeps, handedOver: HandedOverRun, options: JobOptions = {}): Promise<JobOutcome> {
  const { leased, token, flowKey } = handedOver;
  const scope: JobScope = { follow: [], leaseWakeUp: options.leaseWakeUp === true };
  const handler = deps.registry.byName(leased.run.handler);
  const outcome = await afterRun(deps, handler, await runLeased(deps, leased, token));
  // (Always registered: it was woken for a slot of a run of this handler that this worker ran.)
  if (handler) await handOver(deps, handler, flowKey, scope, true);
  return { kind: 'runs', source: leased.event.source, runs: [outcome], follow: scope.follow };
}

/** BullMQ priority of a handler's run jobs: 1 (high) to 3 (low); dispatch jobs have none and go first. */
function jobPriority(handler: Handler | undefined): number | undefined {
  return handler && handler.priority !== 'normal' ? priorityLevel(handler) : undefined;
}

/** One handler's run, from its job: through the gate when the handler is limited. */
async function runJob(deps: ProcessDeps, job: EventJobData, handlerName: string, event: EventRow | null, scope: JobScope): Promise<RunOutcome> {
  const handler = deps.registry.byName(handlerName);
  if (isGated(handler)) return gatedRun(deps, job, handler, event, scope);
  const token = randomUUID();
  const leased = await deps.queries.acquireRun(deps.pool, job.rowId, handlerName, token, deps.settings.leaseMs);
  if (!leased) return notClaimable(deps, job.rowId, handlerName);
  return afterRun(deps, handler, await runLeased(deps, leased, token));
}

/** A run we could not lease: paused (marked so, for the resume), or not ours (finished, leased elsewhere). */
async function notClaimable(deps: ProcessDeps, rowId: number, handler: string): Promise<RunOutcome> {
  if (await deps.queries.markPaused(deps.pool, rowId, handler)) {
    deps.log.info({ rowId, handler }, 'run waits: its handler or source is paused');
    return { kind: 'waiting', handler, reason: 'paused' };
  }
  deps.log.debug({ rowId, handler }, 'run not claimable (finished or leased elsewhere); acknowledging');
  return { kind: 'skipped', handler };
}

/**
 * A limited handler's run through its gate (store/flow.ts gateAcquire): leased and run, or
 * waiting. A run waiting for the rate has its next look scheduled for the next window; a run
 * waiting for a slot has no job (it would only look and wait again): the run that frees a slot
 * wakes the longest waiter of the same handler and key, its job at the front of the queue
 * (handOver), and the reconciler wakes the waiters of a group whose wake-up was lost
 * (WAKE_STALLED).
 */
async function gatedRun(
  deps: ProcessDeps,
  job: EventJobData,
  handler: Handler & { limits: NonNullable<Handler['limits']> },
  known: EventRow | null,
  scope: JobScope,
): Promise<RunOutcome> {
  const { pool, queries, settings } = deps;
  let event = known;
  if (!event && needsEvent(handler)) {
    event = await queries.getEvent(pool, job.rowId);
    if (!event) return { kind: 'skipped', handler: handler.name };
  }
  let request: GateRequest;
  try {
    request = gateRequest(handler, job, event, settings.leaseMs);
  } catch (error) {
    return failUngated(deps, job, handler, `PermanentError: handler "${handler.name}": ${describeError(error)} (fix the key function, then re-drive the event)`);
  }
  const result = await queries.gateAcquire(pool, request, { afterCount: () => deps.faults.hit('worker.gate-after-count') });
  if (result.kind === 'not-claimable') return notClaimable(deps, job.rowId, handler.name);
  if (result.kind === 'wait') {
    // No job of its own: this job's fence was stale (a newer job owns the wait), or the run is not waitable (leased, finished).
    if (!result.job) return { kind: 'skipped', handler: handler.name };
    if (result.reason === 'rate-limit') {
      // Its next look in the window its turn is expected in, a limit's worth of waiters per
      // window ahead of it, instead of every window (a backlog of N waiters would cost N gate
      // transactions per window, starving the pool of the runs that did start).
      const { limit, periodMs } = handler.limits.rateLimit!;
      const delayMs = rateWaitMs(periodMs) + Math.floor(result.ahead / limit) * periodMs;
      scope.follow.push({ job: result.job, delayMs, priority: jobPriority(handler) });
      deps.log.debug({ rowId: job.rowId, handler: handler.name, reason: result.reason, delayMs }, 'run waits for its rate');
    } else if (request.concurrency) {
      // It waits for a slot, its wait committed after the gate's lock was released (or, when
      // another gate held the lock, without counting). A run that freed a slot between that count and this
      // commit looked for waiters before this one was visible: look at the slots once more, now
      // that this wait is visible to every later hand-over. A free slot: the longest waiter
      // (perhaps this run) is woken for it.
      // mutant: flow-contended-no-second-look
      if ((await queries.slotsInUse(pool, handler.name, request.concurrency.key)) < request.concurrency.limit) await handOver(deps, handler, request.concurrency.key, scope, false);
    }
    return { kind: 'waiting', handler: handler.name, reason: result.reason };
  }
  const outcome = await afterRun(deps, handler, await runLeased(deps, result.leased, request.token));
  // The fault point worker.before-hand-over: tests let a new run take the freed slot here.
  await deps.faults.hit('worker.before-hand-over');
  // mutant: flow-no-hand-over
  if (request.concurrency) await handOver(deps, handler, request.concurrency.key, scope, true);
  return outcome;
}

/**
 * A slot of (handler, key) was freed (or looked free): the run waiting longest for it is woken.
 *
 * - `freed` (a run of this handler just ended in the slot), when the caller runs the woken run
 *   at once (scope.leaseWakeUp, taken once per job) and the handler has a concurrency limit
 *   only: the wake-up LEASES the waiter through the slot's gate (LEASE_NEXT_WAITER), and its
 *   follow-up carries the lease. Slots full (a new run took this one first): nobody is woken
 *   (the run in the slot hands it over when it ends).
 * - Otherwise (a rate limit too: its gate is a transaction; a wait's second look; the caller
 *   enqueues its follow-ups; the waiter's handler paused): its job is enqueued at the FRONT of
 *   the queue (lifo), so it starts at the next free worker slot instead of behind a backlog of
 *   dispatches. Not leased: its job takes the slot through the gate like any other (if a new
 *   run took it first, the woken one waits again, first in line).
 * A failure is logged: the reconciler wakes the group's waiters later (WAKE_STALLED).
 */
async function handOver(deps: ProcessDeps, of: Handler, flowKey: string | null, scope: JobScope, freed: boolean): Promise<void> {
  const handler = of.name;
  try {
    const limit = of.limits?.concurrency?.limit;
    // mutant: flow-hand-over-not-leased
    if (freed && scope.leaseWakeUp && limit !== undefined && of.limits?.rateLimit === undefined) {
      scope.leaseWakeUp = false;
      const token = randomUUID();
      const slot = await deps.queries.leaseNextWaiter(deps.pool, { handler, flowKey, token, leaseMs: deps.settings.leaseMs }, limit);
      if (slot.leased) {
        const { run, event } = slot.leased;
        const job: EventJobData = {
          rowId: run.eventRowId,
          source: event.source,
          eventId: event.eventId,
          handler,
          generation: run.generation,
          attempt: run.attempts - 1,
          wait: run.waits,
        };
        scope.follow.push({ job, lifo: true, handedOver: { leased: slot.leased, token, flowKey } });
        return;
      }
      // None waits, or the slots are full: nothing to wake. A waiter not leased (paused): woken below.
      if (slot.waiterId === null) return;
    }
    const woken = await deps.queries.wakeNext(deps.pool, handler, flowKey);
    if (woken) scope.follow.push({ job: woken, lifo: true });
  } catch (error) {
    deps.log.warn({ err: error, handler }, 'could not wake the next waiting run; the reconciler will');
  }
}

/** A run no limit can be applied to (its key function failed): leased without the gate and failed with the reason. */
async function failUngated(deps: ProcessDeps, job: EventJobData, handler: Handler, error: string): Promise<RunOutcome> {
  const token = randomUUID();
  const leased = await deps.queries.acquireRun(deps.pool, job.rowId, handler.name, token, deps.settings.leaseMs);
  if (!leased) return notClaimable(deps, job.rowId, handler.name);
  if (!(await deps.queries.markRunFailed(deps.pool, leased.run.id, token, error))) return { kind: 'lease-lost', handler: handler.name, type: leased.event.type };
  deps.log.error({ rowId: job.rowId, handler: handler.name, error }, 'run failed (dead letter)');
  return { kind: 'failed', handler: handler.name, type: leased.event.type, error };
}

/**
 * The circuit breaker (`circuitBreaker` in defineHandler): a failed attempt counts one more in a
 * row, a success restarts the count; at the threshold the handler pauses itself, recorded with
 * the reason. Its bookkeeping never fails the job: it is logged and the next attempt counts.
 */
async function afterRun(deps: ProcessDeps, handler: Handler | undefined, outcome: RunOutcome): Promise<RunOutcome> {
  const after = handler?.limits?.breakerAfter;
  if (after === undefined || handler === undefined) return outcome;
  try {
    if (outcome.kind === 'done') await deps.queries.recordSuccess(deps.pool, handler.name);
    else if (outcome.kind === 'failed' || outcome.kind === 'retry') {
      const failures = await deps.queries.recordFailure(deps.pool, handler.name, outcome.error);
      // mutant: breaker-never-trips
      if (failures >= after) {
        const reason = `circuit breaker: ${failures} failed attempts in a row (circuitBreaker.consecutiveFailures ${after}); last error: ${outcome.error.slice(0, 500)}`;
        const paused = await deps.queries.pause(deps.pool, 'handler', handler.name, 'circuit-breaker', reason);
        if (paused)
          deps.log.error(
            { handler: handler.name, failures },
            `handler paused by its circuit breaker; its events wait. Resume with: oncehook resume handler ${handler.name} --reason "..."`,
          );
      }
    }
  } catch (error) {
    deps.log.warn({ err: error, handler: handler.name }, 'circuit breaker bookkeeping failed');
  }
  return outcome;
}

async function dispatch(deps: ProcessDeps, job: EventJobData, scope: JobScope): Promise<JobOutcome> {
  const { queries, pool, settings } = deps;
  const { follow } = scope;
  // The job carries the event's kind and type (jobs from older versions do not: read the event).
  let target: { id: number; source: string; eventId: string; kind: string; type: string; state: string } | null =
    // mutant: dispatch-reads-event
    job.kind !== undefined && job.type !== undefined ? { id: job.rowId, source: job.source, eventId: job.eventId, kind: job.kind, type: job.type, state: 'received' } : null;
  if (!target) target = await queries.getEvent(pool, job.rowId);
  if (!target) return { kind: 'skipped' };
  const event = target;
  const best = deps.registry.bestPriorityLevel();
  /** Runs of this handler are not leased by the dispatch: a limit to check, or a lower priority. */
  // mutant: priority-ignored
  const leasedApart = (h: Handler) => isGated(h) || priorityLevel(h) > best;
  const runJobOf = (handler: string): EventJobData => ({ rowId: event.id, source: event.source, eventId: event.eventId, handler, generation: 0, attempt: 0 });
  /** A run the dispatch created but did not lease. */
  const unleased = (h: Handler, known: EventRow | null): Promise<RunOutcome> | RunOutcome => {
    if (priorityLevel(h) > best) {
      follow.push({ job: runJobOf(h.name), priority: jobPriority(h) });
      return { kind: 'deferred', handler: h.name };
    }
    return runJob(deps, runJobOf(h.name), h.name, known, scope);
  };
  // `received` is a guess when it came from the job: every statement below is guarded by the
  // row's real state, and a repeated job falls through to the claimable runs.
  if (event.state === 'received') {
    const handlers = deps.registry.match(event.source, event.kind, event.type);
    if (handlers.length === 0) {
      const state = settings.unhandled === 'fail' ? 'failed' : 'done';
      const note = `no handler registered for ${event.source} (${event.kind}) "${event.type}"; ${state === 'done' ? 'recorded without effects' : 'failed (UNHANDLED_EVENTS=fail)'}`;
      if (!(await queries.finishUnhandled(pool, event.id, state, note))) return { kind: 'skipped' };
      deps.events.emit('event:unhandled', { source: event.source, type: event.type });
      deps.log.info({ rowId: event.id, source: event.source, eventId: event.eventId, type: event.type }, note);
      return { kind: 'unhandled', source: event.source, type: event.type, state };
    }
    const tokens = new Map(handlers.map((h) => [h.name, randomUUID()]));
    // Taken before the dispatch waits for its batch: the lease clock starts early, never late.
    const leasedAt = performance.now();
    const dispatched = await deps.dispatcher.dispatch({
      rowId: event.id,
      runs: handlers.map((h) => ({ handler: h.name, token: tokens.get(h.name)!, deferred: leasedApart(h) })),
      traceParent: job.trace ?? null,
    });
    if (dispatched) {
      deps.log.debug({ rowId: event.id, handlers: handlers.map((h) => h.name) }, 'dispatched');
      const runs = await Promise.all(
        dispatched.runs.map(async (run): Promise<RunOutcome> => {
          const handler = deps.registry.byName(run.handler);
          if (run.state === 'processing') return afterRun(deps, handler, await runLeased(deps, { run, event: dispatched.event, steps: [], leasedAt }, tokens.get(run.handler)!));
          if (run.waiting === 'paused') return { kind: 'waiting', handler: run.handler, reason: 'paused' };
          // Not reachable (the runs come from registry.match); not a pause either: leave it to its job.
          if (!handler) return { kind: 'skipped', handler: run.handler };
          return unleased(handler, dispatched.event);
        }),
      );
      return { kind: 'runs', source: event.source, runs, follow };
    }
  }
  // Dispatched already (a repeated job, or runs carried over from an older database): run
  // whatever is claimable; a limited or lower-priority handler's run through its own path.
  const apart = deps.registry.match(event.source, event.kind, event.type).filter(leasedApart);
  const token = randomUUID();
  const leased = await queries.acquireClaimableRuns(
    pool,
    job.rowId,
    token,
    settings.leaseMs,
    apart.map((h) => h.name),
  );
  const runs = await Promise.all([
    ...leased.map(async (l) => afterRun(deps, deps.registry.byName(l.run.handler), await runLeased(deps, l, token))),
    ...apart.map((h) => unleased(h, null)),
  ]);
  if (runs.length === 0) return { kind: 'skipped' };
  return { kind: 'runs', source: event.source, runs, follow };
}

/** The handler a run belongs to: by name, or (a run from before handler names) the event type's only handler. */
async function resolveHandler(deps: ProcessDeps, leased: LeasedRun, token: string): Promise<Handler | string> {
  const { run, event } = leased;
  if (run.handler !== '') return deps.registry.byName(run.handler) ?? `handler "${run.handler}" is not loaded by this worker (check ONCEHOOK_HANDLERS on every worker)`;
  const matches = deps.registry.match(event.source, event.kind, event.type);
  if (matches.length !== 1) {
    return `this run predates handler names and needs exactly one handler registered for ${event.source} "${event.type}" to adopt it; this worker has ${matches.length}`;
  }
  const handler = matches[0]!;
  if (!(await deps.queries.bindLegacyRun(deps.pool, run.id, token, handler.name))) throw new LeaseLostError(run.id);
  run.handler = handler.name;
  return handler;
}

/**
 * The payload as the handler will see it: parsed by its schema (once per attempt: a schema's
 * transforms run once, and the handler gets their output), or what does not match.
 */
function parsePayload(handler: Handler, payload: unknown): { value: unknown } | { problem: string } {
  if (!handler.payloadSchema) return { value: payload };
  const result = handler.payloadSchema.safeParse(payload);
  if (result.success) return { value: result.data };
  const issues = result.error.issues.slice(0, 5).map((issue) => `${issue.path.length ? `payload.${issue.path.join('.')}` : 'payload'}: ${issue.message}`);
  return { problem: `the payload does not match handler "${handler.name}"'s schema: ${issues.join('; ')}` };
}

function handlerEvent(event: EventRow, leased: LeasedRun, payload: unknown): HandlerEvent {
  return {
    source: event.source,
    kind: event.kind,
    eventId: event.eventId,
    type: event.type,
    payload,
    meta: event.meta,
    receivedAt: event.receivedAt,
    signedAt: event.signedAt,
    attempt: leased.run.attempts,
    generation: leased.run.generation,
    handler: leased.run.handler,
  };
}

/**
 * One attempt of a leased run, in a span of the event's trace (the delivery's traceparent,
 * stored on the event by the dispatch): retries and recoveries continue the same trace.
 */
export async function runLeased(deps: ProcessDeps, leased: LeasedRun, token: string): Promise<RunOutcome> {
  const { run, event } = leased;
  return inSpan(
    'oncehook.run',
    {
      parent: contextFrom(event.traceParent),
      attributes: {
        'oncehook.source': event.source,
        'oncehook.event_id': event.eventId,
        'oncehook.event_type': event.type,
        'oncehook.handler': run.handler,
        'oncehook.attempt': run.attempts,
        'oncehook.generation': run.generation,
      },
    },
    async (span) => {
      // A marker that this attempt started, ended at once: if the process dies mid-attempt (its
      // run span never ends, so it is never exported), the trace still shows the attempt.
      tracer()
        // mutant: attempt-marker-off
        .startSpan('oncehook.attempt', { attributes: { 'oncehook.handler': run.handler, 'oncehook.attempt': run.attempts } })
        .end();
      const result = await runLeasedAttempt(deps, leased, token);
      span.setAttribute('oncehook.outcome', result.kind);
      if (result.kind === 'failed' || result.kind === 'retry') span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
      return result;
    },
  );
}

/** How an attempt ends, each fenced by the run's token: failed (a dead letter), retried later, or lost. */
interface AttemptEndings {
  outcome(kind: 'done' | 'lease-lost'): RunOutcome;
  fail(error: string): Promise<RunOutcome>;
  retry(error: string, logged: unknown): Promise<RunOutcome>;
}

function attemptEndings(deps: ProcessDeps, leased: LeasedRun, token: string, log: Logger, policy: RetryPolicy): AttemptEndings {
  const { pool, queries } = deps;
  const { run, event } = leased;
  const outcome = (kind: 'done' | 'lease-lost') => ({ kind, handler: run.handler, type: event.type });
  return {
    outcome,
    async fail(error) {
      if (!(await queries.markRunFailed(pool, run.id, token, error))) return outcome('lease-lost');
      log.error({ error }, 'run failed (dead letter)');
      return { kind: 'failed', handler: run.handler, type: event.type, error };
    },
    async retry(error, logged) {
      if (!(await queries.releaseRunForRetry(pool, run.id, token, error))) return outcome('lease-lost');
      const delayMs = retryDelayMs(policy, run.attempts, logged);
      // One line per retry (what failed, which attempt, when the next): an API down for a while
      // retries many runs many times. The stack once per run (its first failure), else at debug.
      const next = `attempt ${run.attempts} of ${policy.maxAttempts} failed; next try in ${delayMs < 10_000 ? `${(delayMs / 1000).toFixed(1)} s` : `${Math.round(delayMs / 1000)} s`}`;
      if (run.attempts <= 1) log.warn({ err: logged, attempt: run.attempts, nextTryInMs: delayMs }, `run failed: ${next}`);
      else {
        log.warn({ error, attempt: run.attempts, nextTryInMs: delayMs }, `run failed: ${next}`);
        log.debug({ err: logged }, 'the failure in full');
      }
      const own = run.handler === '' ? undefined : deps.registry.byName(run.handler);
      return {
        kind: 'retry',
        handler: run.handler,
        type: event.type,
        error,
        attempt: run.attempts,
        generation: run.generation,
        delayMs,
        priority: jobPriority(own),
      };
    },
  };
}

/**
 * What must hold before the handler runs: attempts left, a payload that can be read, the
 * handler loaded here, a payload its schema accepts. Returns the handler with its parsed
 * payload, or how the attempt ended without running it.
 */
async function prepareAttempt(
  deps: ProcessDeps,
  leased: LeasedRun,
  token: string,
  policy: RetryPolicy,
  end: AttemptEndings,
): Promise<{ handler: Handler; payload: unknown } | RunOutcome> {
  const { run, event } = leased;
  if (attemptsExhausted(policy, run.attempts)) {
    // The previous attempts ended without a verdict (crashes or hangs): give up.
    return end.fail(`gave up after ${run.attempts - 1} attempts; last error: ${run.lastError ?? 'none recorded'}`);
  }
  if (event.payloadUnreadable) {
    // Stored before the payload limits, with a number no JavaScript number can hold: the
    // database did not even send it (queries.ts, UNREADABLE_PAYLOAD). No attempt can succeed.
    return end.fail(
      'PermanentError: the stored payload cannot be read safely: it holds a number outside the range of a JavaScript number (stored before the payload limits; printed in full it can take hundreds of MB), so no handler could use it. The edge now refuses such payloads (docs/security.md, "Payload limits")',
    );
  }
  let handler: Handler | string;
  try {
    handler = await resolveHandler(deps, leased, token);
  } catch (error) {
    if (isLeaseLostError(error)) return end.outcome('lease-lost');
    throw error;
  }
  if (typeof handler === 'string') {
    const verdict = verdictForProblem(policy, run.attempts, handler);
    return verdict.retry ? end.retry(handler, handler) : end.fail(verdict.reason);
  }
  const parsed = parsePayload(handler, event.payload);
  if ('problem' in parsed) return end.fail(`PermanentError: ${parsed.problem}`);
  // mutant: payload-parsed-twice
  return { handler, payload: parsed.value };
}

async function runLeasedAttempt(deps: ProcessDeps, leased: LeasedRun, token: string): Promise<RunOutcome> {
  const { run, event } = leased;
  const log = deps.log.child({
    rowId: event.id,
    runId: run.id,
    source: event.source,
    eventId: event.eventId,
    type: event.type,
    handler: run.handler || '(unbound)',
    attempt: run.attempts,
  });
  // This handler's policy: its own `retries` over the worker's (retry-policy.ts owns the merge).
  const policy = policyFor(deps.settings.retry, run.handler === '' ? undefined : deps.registry.byName(run.handler));
  const end = attemptEndings(deps, leased, token, log, policy);
  const ready = await prepareAttempt(deps, leased, token, policy, end);
  if ('kind' in ready) return ready;
  return runHandler(deps, leased, token, log, ready, { policy, end });
}

/**
 * Runs the handler under a kept lease (lease-keeper.ts: losing the lease, or nearing its end
 * unrenewed, aborts every step's signal), then marks the run done, fenced; an error becomes
 * the policy's verdict, a lost lease commits nothing more, a pause --now gives the attempt back.
 */
async function runHandler(
  deps: ProcessDeps,
  leased: LeasedRun,
  token: string,
  log: Logger,
  ready: { handler: Handler; payload: unknown },
  { policy, end }: { policy: RetryPolicy; end: AttemptEndings },
): Promise<RunOutcome> {
  const { pool, queries, settings } = deps;
  const { run, event } = leased;
  let ctx: RunContext | undefined;
  const lease = keepLease(deps, { runId: run.id, token, leaseMs: settings.leaseMs, leasedAt: leased.leasedAt, holdsRunRow: () => ctx?.holdsRunRow === true });
  const handle = { runId: run.id, token, source: event.source, eventId: event.eventId, handler: run.handler, attempt: run.attempts };
  ctx = createRunContext(
    deps,
    { ...handle, generation: run.generation, keyScheme: run.keyScheme, leaseMs: settings.leaseMs, onLeaseRenewed: lease.renewed },
    leased.steps,
    log,
    lease.signal,
  );
  try {
    await deps.faults.hit('worker.in-handler');
    await ready.handler.handle(handlerEvent(event, leased, ready.payload), ctx);
    await deps.faults.hit('worker.before-done');
    // mutant: done-batch-skipped
    if (!ctx.completed && !(await deps.batched.markDone({ runId: run.id, token }))) throw new LeaseLostError(run.id);
    log.info('run done');
    return end.outcome('done');
  } catch (error) {
    if (isLeaseLostError(error) || isLeaseLostError(lease.signal.reason)) {
      log.warn({ err: error }, 'lease lost; stopping without committing (the new owner finishes the run)');
      return end.outcome('lease-lost');
    }
    if (error instanceof RunStoppedError) {
      // pause --now: stopped at a step boundary; waits for the resume, its attempt given back.
      if (!(await queries.releaseRunPaused(pool, run.id, token))) return end.outcome('lease-lost');
      log.info('run stopped at a step boundary (paused with --now); it waits for the resume');
      return { kind: 'waiting', handler: run.handler, reason: 'paused' };
    }
    const message = describeError(error);
    const verdict = verdictFor(policy, run.attempts, error, message);
    return verdict.retry ? end.retry(message, error) : end.fail(verdict.reason);
  } finally {
    lease.stop();
  }
}
