/**
 * The state machine, run once per job.
 *
 * A dispatch job (no handler in the job):
 *   no handler registered for (source, type) -> the event is done (or failed, per
 *     UNHANDLED_EVENTS) with a note; counted in webhook_events_unhandled_total
 *   dispatch: received -> processing, one run per handler, each created already leased to
 *     this worker (one statement); the runs then go on at once, side by side
 *   0 rows (dispatched already: a repeated job) -> lease whatever runs are claimable
 *
 * A run job (one handler's run), and each run of a dispatch:
 *   acquire the lease (received -> processing, or take over an expired lease), reading the
 *     event and the run's recorded steps in the same statement
 *     0 rows -> not ours (done, failed, or leased by a live worker): acknowledge, stop
 *   too many attempts -> failed
 *   the stored payload cannot be read safely (stored before the payload limits) -> failed
 *   the handler is not loaded here -> retried (another worker may have it), failed at the cap
 *   the payload does not match the handler's schema -> failed (PermanentError naming the field)
 *   run the handler (lease renewed in the background; fenced steps)
 *   done (fenced; or already committed by the handler's `final` step)
 *   on error: PermanentError or last attempt -> failed; otherwise -> received + retry later
 *   lease lost at any point -> stop, commit nothing more; the new owner finishes
 */
import { randomUUID } from 'node:crypto';
import { SpanStatusCode } from '@opentelemetry/api';
import { contextFrom, describeError, inSpan, tracer, type EventJobData, type EventRow, type Faults, type Logger, type Pool } from '@oncehook/shared';
import { isLeaseLostError, LeaseLostError, type Handler, type HandlerEvent } from '@oncehook/sdk';
import type { LeasedRun, Queries } from './store/queries.js';
import { attemptsExhausted, policyFor, retryDelayMs, type RetryPolicy, verdictFor, verdictForProblem } from './retry-policy.js';
import { createRunContext, type EngineHooks, type RunContext } from './handler-context.js';
import type { HandlerRegistry } from './registry.js';

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
  log: Logger;
  faults: Faults;
  settings: ProcessSettings;
  hooks?: EngineHooks;
  /** Called when an event has no handler (webhook_events_unhandled_total). */
  onUnhandled?: (event: { provider: string; type: string }) => void;
}

export type RunOutcome =
  | { kind: 'done'; handler: string; type: string }
  | { kind: 'failed'; handler: string; type: string; error: string }
  /** Recorded on the run (state received); the caller schedules job attempt `attempt` + 1. */
  /** `delayMs`: before the next attempt, from the handler's retry policy. */
  | { kind: 'retry'; handler: string; type: string; error: string; attempt: number; generation: number; delayMs: number }
  | { kind: 'lease-lost'; handler: string; type: string }
  /** Not ours to run (finished, or leased by another worker): acknowledged, nothing done. */
  | { kind: 'skipped'; handler: string };

export type JobOutcome =
  | { kind: 'runs'; provider: string; runs: RunOutcome[] }
  | { kind: 'unhandled'; provider: string; type: string; state: 'done' | 'failed' }
  | { kind: 'skipped' };

export async function processJob(deps: ProcessDeps, job: EventJobData): Promise<JobOutcome> {
  if (job.handler !== undefined) {
    const token = randomUUID();
    const leased = await deps.queries.acquireRun(deps.pool, job.rowId, job.handler, token, deps.settings.leaseMs);
    if (!leased) {
      deps.log.debug({ rowId: job.rowId, handler: job.handler }, 'run not claimable (finished or leased elsewhere); acknowledging');
      return { kind: 'runs', provider: job.provider, runs: [{ kind: 'skipped', handler: job.handler }] };
    }
    return { kind: 'runs', provider: job.provider, runs: [await runLeased(deps, leased, token)] };
  }
  return dispatch(deps, job);
}

async function dispatch(deps: ProcessDeps, job: EventJobData): Promise<JobOutcome> {
  const { queries, pool, settings } = deps;
  // The job carries the event's kind and type (jobs from older versions do not: read the event).
  let target: { id: number; provider: string; eventId: string; kind: string; type: string; state: string } | null =
    job.kind !== undefined && job.type !== undefined ? { id: job.rowId, provider: job.provider, eventId: job.eventId, kind: job.kind, type: job.type, state: 'received' } : null;
  if (!target) target = await queries.getEvent(pool, job.rowId);
  if (!target) return { kind: 'skipped' };
  const event = target;
  // `received` is a guess when it came from the job: every statement below is guarded by the
  // row's real state, and a repeated job falls through to the claimable runs.
  if (event.state === 'received') {
    const handlers = deps.registry.match(event.provider, event.kind, event.type);
    if (handlers.length === 0) {
      const state = settings.unhandled === 'fail' ? 'failed' : 'done';
      const note = `no handler registered for ${event.provider} (${event.kind}) "${event.type}"; ${state === 'done' ? 'recorded without effects' : 'failed (UNHANDLED_EVENTS=fail)'}`;
      if (!(await queries.finishUnhandled(pool, event.id, state, note))) return { kind: 'skipped' };
      deps.onUnhandled?.({ provider: event.provider, type: event.type });
      deps.log.info({ rowId: event.id, provider: event.provider, eventId: event.eventId, type: event.type }, note);
      return { kind: 'unhandled', provider: event.provider, type: event.type, state };
    }
    const tokens = new Map(handlers.map((h) => [h.name, randomUUID()]));
    const dispatched = await queries.dispatchAndLease(
      pool,
      event.id,
      [...tokens].map(([handler, token]) => ({ handler, token })),
      settings.leaseMs,
      job.trace ?? null,
    );
    if (dispatched) {
      deps.log.debug({ rowId: event.id, handlers: handlers.map((h) => h.name) }, 'dispatched');
      const runs = await Promise.all(dispatched.runs.map((run) => runLeased(deps, { run, event: dispatched.event, steps: [] }, tokens.get(run.handler)!)));
      return { kind: 'runs', provider: event.provider, runs };
    }
  }
  // Dispatched already (a repeated job, or runs carried over from an older database): run
  // whatever is claimable.
  const token = randomUUID();
  const leased = await queries.acquireClaimableRuns(pool, job.rowId, token, settings.leaseMs);
  if (leased.length === 0) return { kind: 'skipped' };
  return { kind: 'runs', provider: event.provider, runs: await Promise.all(leased.map((l) => runLeased(deps, l, token))) };
}

/** The handler a run belongs to: by name, or (a run from before handler names) the event type's only handler. */
async function resolveHandler(deps: ProcessDeps, leased: LeasedRun, token: string): Promise<Handler | string> {
  const { run, event } = leased;
  if (run.handler !== '') return deps.registry.byName(run.handler) ?? `handler "${run.handler}" is not loaded by this worker (check ONCEHOOK_HANDLERS on every worker)`;
  const matches = deps.registry.match(event.provider, event.kind, event.type);
  if (matches.length !== 1) {
    return `this run predates handler names and needs exactly one handler registered for ${event.provider} "${event.type}" to adopt it; this worker has ${matches.length}`;
  }
  const handler = matches[0]!;
  if (!(await deps.queries.bindLegacyRun(deps.pool, run.id, token, handler.name))) throw new LeaseLostError(run.id);
  run.handler = handler.name;
  return handler;
}

function payloadProblem(handler: Handler, payload: unknown): string | null {
  if (!handler.payloadSchema) return null;
  const result = handler.payloadSchema.safeParse(payload);
  if (result.success) return null;
  const issues = result.error.issues.slice(0, 5).map((issue) => `${issue.path.length ? `payload.${issue.path.join('.')}` : 'payload'}: ${issue.message}`);
  return `the payload does not match handler "${handler.name}"'s schema: ${issues.join('; ')}`;
}

function handlerEvent(event: EventRow, leased: LeasedRun, payload: unknown): HandlerEvent {
  return {
    source: event.provider,
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
        'oncehook.source': event.provider,
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
        .startSpan('oncehook.attempt', { attributes: { 'oncehook.handler': run.handler, 'oncehook.attempt': run.attempts } })
        .end();
      const result = await runLeasedAttempt(deps, leased, token);
      span.setAttribute('oncehook.outcome', result.kind);
      if (result.kind === 'failed' || result.kind === 'retry') span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
      return result;
    },
  );
}

async function runLeasedAttempt(deps: ProcessDeps, leased: LeasedRun, token: string): Promise<RunOutcome> {
  const { pool, queries, settings } = deps;
  const { run, event } = leased;
  const log = deps.log.child({
    rowId: event.id,
    runId: run.id,
    provider: event.provider,
    eventId: event.eventId,
    type: event.type,
    handler: run.handler || '(unbound)',
    attempt: run.attempts,
  });
  const outcome = (kind: 'done' | 'lease-lost') => ({ kind, handler: run.handler, type: event.type });
  const fail = async (error: string): Promise<RunOutcome> => {
    if (!(await queries.markRunFailed(pool, run.id, token, error))) return outcome('lease-lost');
    log.error({ error }, 'run failed (dead letter)');
    return { kind: 'failed', handler: run.handler, type: event.type, error };
  };
  // This handler's policy: its own `retries` over the worker's (retry-policy.ts owns the merge).
  const policy = policyFor(settings.retry, run.handler === '' ? undefined : deps.registry.byName(run.handler));
  const retry = async (error: string, logged: unknown): Promise<RunOutcome> => {
    if (!(await queries.releaseRunForRetry(pool, run.id, token, error))) return outcome('lease-lost');
    log.warn({ err: logged }, 'run failed; will retry');
    return { kind: 'retry', handler: run.handler, type: event.type, error, attempt: run.attempts, generation: run.generation, delayMs: retryDelayMs(policy, run.attempts) };
  };

  if (attemptsExhausted(policy, run.attempts)) {
    // The previous attempts ended without a verdict (crashes or hangs): give up.
    return fail(`gave up after ${run.attempts - 1} attempts; last error: ${run.lastError ?? 'none recorded'}`);
  }
  if (event.payloadUnreadable) {
    // Stored before the payload limits, with a number no JavaScript number can hold: the
    // database did not even send it (queries.ts, UNREADABLE_PAYLOAD). No attempt can succeed.
    return fail(
      'PermanentError: the stored payload cannot be read safely: it holds a number outside the range of a JavaScript number (stored before the payload limits; printed in full it can take hundreds of MB), so no handler could use it. The edge now refuses such payloads (docs/security.md, "Payload limits")',
    );
  }

  let handler: Handler | string;
  try {
    handler = await resolveHandler(deps, leased, token);
  } catch (error) {
    if (isLeaseLostError(error)) return outcome('lease-lost');
    throw error;
  }
  if (typeof handler === 'string') {
    const verdict = verdictForProblem(policy, run.attempts, handler);
    return verdict.retry ? retry(handler, handler) : fail(verdict.reason);
  }

  const problem = payloadProblem(handler, event.payload);
  if (problem) return fail(`PermanentError: ${problem}`);
  const payload = handler.payloadSchema ? handler.payloadSchema.parse(event.payload) : event.payload;

  // Keep the lease alive while the handler runs; losing it aborts the handler's signal. Not
  // while a local step holds the run row: the renewal would wait for its COMMIT on a pool
  // connection of its own, and the step renews the lease itself (handler-context.ts).
  const abort = new AbortController();
  let ctx: RunContext | undefined;
  const keeper = setInterval(
    () => {
      if (ctx?.holdsRunRow) return;
      queries.renewLease(pool, run.id, token, settings.leaseMs).then(
        (held) => {
          if (!held && !abort.signal.aborted) {
            log.warn('lease lost while the handler was running; aborting');
            abort.abort(new LeaseLostError(run.id));
          }
        },
        (error: unknown) => log.warn({ err: error }, 'lease renewal failed; will retry'),
      );
    },
    Math.max(100, Math.floor(settings.leaseMs / 3)),
  );

  ctx = createRunContext(
    deps,
    {
      runId: run.id,
      token,
      provider: event.provider,
      eventId: event.eventId,
      handler: run.handler,
      attempt: run.attempts,
      generation: run.generation,
      keyScheme: run.keyScheme,
      leaseMs: settings.leaseMs,
    },
    leased.steps,
    log,
    abort.signal,
  );

  try {
    await deps.faults.hit('worker.in-handler');
    await handler.handle(handlerEvent(event, leased, payload), ctx);
    await deps.faults.hit('worker.before-done');
    if (!ctx.completed && !(await queries.markRunDone(pool, run.id, token))) throw new LeaseLostError(run.id);
    log.info('run done');
    return outcome('done');
  } catch (error) {
    if (isLeaseLostError(error) || isLeaseLostError(abort.signal.reason)) {
      log.warn({ err: error }, 'lease lost; stopping without committing (the new owner finishes the run)');
      return outcome('lease-lost');
    }
    const message = describeError(error);
    const verdict = verdictFor(policy, run.attempts, error, message);
    return verdict.retry ? retry(message, error) : fail(verdict.reason);
  } finally {
    clearInterval(keeper);
  }
}
