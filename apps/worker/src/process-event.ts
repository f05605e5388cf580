/**
 * The state machine, run once per job:
 *
 *   acquire lease (received -> processing, or take over an expired lease)
 *     0 rows -> not ours (done, failed, or leased by a live worker): acknowledge, stop
 *   too many attempts -> failed
 *   no handler for the type -> done, with a note
 *   run the handler (lease renewed in the background; fenced steps)
 *   done (fenced; or already committed by the handler's completing step)
 *   on error: PermanentError or last attempt -> failed; otherwise -> received + retry later
 *   lease lost at any point -> stop, commit nothing more; the new owner finishes
 */
import { randomUUID } from 'node:crypto';
import { UnrecoverableError } from 'bullmq';
import { LeaseLostError, PermanentError, queries, type EventJobData, type Faults, type Logger, type Pool } from '@oncehook/shared';
import { createHandlerContext } from './handler-context';
import type { HandledEvent, HandlerRegistry } from './handlers';

export interface ProcessDeps {
  pool: Pool;
  registry: HandlerRegistry;
  log: Logger;
  faults: Faults;
  settings: { leaseMs: number; maxAttempts: number };
}

export type ProcessOutcome =
  | { kind: 'done'; rowId: number; type: string }
  | { kind: 'no-handler'; rowId: number; type: string }
  | { kind: 'failed'; rowId: number; type: string; error: string }
  /** Recorded on the row (state received); the caller schedules attempt `attempt + 1`. */
  | { kind: 'retry'; rowId: number; type: string; error: string; attempt: number }
  /** Not ours to run (finished, or leased by another worker): acknowledged, nothing done. */
  | { kind: 'skipped'; rowId: number }
  | { kind: 'lease-lost'; rowId: number; type: string };

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

export async function processEvent(deps: ProcessDeps, job: EventJobData): Promise<ProcessOutcome> {
  const { pool, settings } = deps;
  const token = randomUUID();
  const row = await queries.acquireLease(pool, job.rowId, token, settings.leaseMs);
  if (!row) {
    deps.log.debug({ rowId: job.rowId, provider: job.provider, eventId: job.eventId }, 'event not claimable (finished or leased elsewhere); acknowledging');
    return { kind: 'skipped', rowId: job.rowId };
  }
  const log = deps.log.child({ rowId: row.id, provider: row.provider, eventId: row.eventId, type: row.type, attempt: row.attempts });

  if (row.attempts > settings.maxAttempts) {
    // The previous attempts ended without a verdict (crashes or hangs): give up.
    const error = `gave up after ${row.attempts - 1} attempts; last error: ${row.lastError ?? 'none recorded'}`;
    if (!(await queries.markFailed(pool, row.id, token, error))) return { kind: 'lease-lost', rowId: row.id, type: row.type };
    log.error({ error }, 'event failed (dead letter)');
    return { kind: 'failed', rowId: row.id, type: row.type, error };
  }

  const handler = deps.registry.find(row.provider, row.kind, row.type);
  if (!handler) {
    const note = `no handler registered for ${row.kind} "${row.type}"; recorded without effects`;
    const marked = await queries.markDone(pool, row.id, token, note);
    log.info(note);
    return marked ? { kind: 'no-handler', rowId: row.id, type: row.type } : { kind: 'lease-lost', rowId: row.id, type: row.type };
  }

  // Keep the lease alive while the handler runs; losing it aborts the handler's signal.
  const abort = new AbortController();
  const keeper = setInterval(() => {
    queries.renewLease(pool, row.id, token, settings.leaseMs).then(
      (held) => {
        if (!held && !abort.signal.aborted) {
          log.warn('lease lost while the handler was running; aborting');
          abort.abort(new LeaseLostError(row.id));
        }
      },
      (error: unknown) => log.warn({ err: error }, 'lease renewal failed; will retry'),
    );
  }, Math.max(100, Math.floor(settings.leaseMs / 3)));

  const ctx = createHandlerContext(deps, { rowId: row.id, token, provider: row.provider, eventId: row.eventId, attempt: row.attempts }, log, abort.signal);
  const event: HandledEvent = {
    rowId: row.id,
    provider: row.provider,
    kind: row.kind,
    eventId: row.eventId,
    type: row.type,
    payload: row.payload,
    signedAt: row.signedAt,
    attempt: row.attempts,
    generation: row.generation,
  };

  try {
    await deps.faults.hit('worker.in-handler');
    await handler(event, ctx);
    await deps.faults.hit('worker.before-done');
    if (!ctx.completed && !(await queries.markDone(pool, row.id, token))) throw new LeaseLostError(row.id);
    log.info('event done');
    return { kind: 'done', rowId: row.id, type: row.type };
  } catch (error) {
    if (error instanceof LeaseLostError || abort.signal.reason instanceof LeaseLostError) {
      log.warn({ err: error }, 'lease lost; stopping without committing (the new owner finishes the event)');
      return { kind: 'lease-lost', rowId: row.id, type: row.type };
    }
    const message = describe(error);
    const permanent = error instanceof PermanentError || error instanceof UnrecoverableError;
    if (permanent || row.attempts >= settings.maxAttempts) {
      const reason = permanent ? message : `attempt ${row.attempts}/${settings.maxAttempts} failed: ${message}`;
      if (!(await queries.markFailed(pool, row.id, token, reason))) return { kind: 'lease-lost', rowId: row.id, type: row.type };
      log.error({ err: error }, 'event failed (dead letter)');
      return { kind: 'failed', rowId: row.id, type: row.type, error: reason };
    }
    if (!(await queries.releaseForRetry(pool, row.id, token, message))) return { kind: 'lease-lost', rowId: row.id, type: row.type };
    log.warn({ err: error }, 'handler failed; will retry');
    return { kind: 'retry', rowId: row.id, type: row.type, error: message, attempt: row.attempts };
  } finally {
    clearInterval(keeper);
  }
}
