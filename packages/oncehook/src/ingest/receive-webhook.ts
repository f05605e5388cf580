/**
 * One delivery, from its verified body to its answer (edge-guards.ts checked what it could
 * before the body): verify the raw bytes, read the stable event id, claim it (batched with
 * concurrent deliveries: claim-batcher.ts), answer after the claim committed; the new event's
 * dispatch job follows through the enqueue relay. Each answer and why it is what it is: the
 * README's endpoint table and docs/architecture.md, "The edge: one delivery". Metric labels
 * never come from what a sender can make up (type-labels.ts).
 */
import type { ClaimResult } from '@oncehook/core';
import {
  isDatabaseUnavailableError,
  isUnstorablePayloadError,
  OverloadedError,
  sourceFields,
  VerificationError,
  currentTraceparent,
  type EdgeResult,
  type VerifiedEvent,
  type IngestMetrics,
  type Logger,
} from '@oncehook/shared';
import type { Reply, Verified, WebhookSource } from '@oncehook/providers';
import type { ClaimBatcher, EnqueueRelay } from '@oncehook/core';
import { trace } from '@opentelemetry/api';
import type { Context } from 'hono';
import type { EdgeGuards } from './edge-guards.js';
import type { IngestSettings } from './ingest-settings.js';
import type { RecentDuplicates } from './recent-duplicates.js';
import type { TypeLabels } from './type-labels.js';

/** What the webhook route reads and writes: the sources, its settings, its counters. */
export interface WebhookDeps {
  sources: ReadonlyMap<string, WebhookSource>;
  settings: Pick<IngestSettings, 'retention' | 'retryAfterSeconds' | 'duplicateReenqueueAfterMs' | 'maxWaitingClaims'>;
  metrics: IngestMetrics;
  log: Logger;
  recentDuplicates?: RecentDuplicates;
  typeLabels?: TypeLabels;
  now?: () => Date;
}

/**
 * Where a verified delivery goes, one way: the claim (which hands a new event's job to the
 * relay), and the relay itself for a stale duplicate's nudge. Nothing here adds to the queue.
 */
export interface DeliveryPath {
  claims: ClaimBatcher;
  relay: EnqueueRelay;
}

export async function receiveWebhook(c: Context, deps: WebhookDeps, path: DeliveryPath, edge: EdgeGuards): Promise<Response> {
  const { claims } = path;
  const started = process.hrtime.bigint();
  const source = deps.sources.get(c.req.param('source') ?? '');
  if (!source) throw new Error('receiveWebhook reached without a known source'); // guarded by edge-guards
  const { metrics } = deps;
  /** Records the answer's time and outcome (a batch counts its elements itself). */
  const timed = (result: EdgeResult, response: Response): Response => {
    trace.getActiveSpan()?.setAttributes({ 'oncehook.outcome': result, 'http.response.status_code': response.status });
    metrics.ingestDuration.observe({ result }, Number(process.hrtime.bigint() - started) / 1e9);
    return response;
  };
  const answer = (result: EdgeResult, type: string, response: Response): Response => {
    metrics.eventsTotal.inc({ ...sourceFields(source.name), type, result });
    return timed(result, response);
  };

  // Counted into the body budget as it arrives; refused mid-body past BODY_LIMIT_BYTES or the
  // budget (edge-guards.ts).
  const body = await edge.readBody(c);
  if (body instanceof Response) return body;
  const rawBody = body;
  const now = deps.now?.() ?? new Date();

  // 1. Verify, THEN deduplicate: an unverified request must never reach the unique index,
  //    or anyone could pre-consume the id of a future real event.
  let verified: Verified;
  try {
    verified = source.verify({ rawBody, header: (name) => c.req.header(name) ?? null, now });
  } catch (error) {
    if (!(error instanceof VerificationError)) throw error;
    edge.rejected(source.name, error.reason, error.status, error.message);
    return answer('rejected', 'unknown', c.json({ error: error.reason, message: error.message }, error.status));
  }
  if ('reply' in verified) {
    deps.log.info({ source: source.name }, verified.reply.note);
    return replyResponse(c, verified.reply);
  }
  if ('events' in verified) return receiveBatch(c, deps, path, edge, verified.events, now, answer, timed);
  const { event } = verified;
  trace.getActiveSpan()?.setAttributes({ 'oncehook.event_id': event.eventId, 'oncehook.event_type': event.type });
  const typeLabel = (type: string) => deps.typeLabels?.label(event.source, event.kind, type) ?? 'other';
  const log = deps.log.isLevelEnabled('info') ? deps.log.child({ source: event.source, eventId: event.eventId, type: event.type }) : deps.log;

  // Older than the key horizon (KEY_RETENTION_DAYS): its key may already be deleted, so
  // claiming it could process a late redelivery as new. Answer 2xx (so the provider stops) and
  // do nothing. Between the payload and the key horizons the key is still there: the claim
  // answers duplicate.
  // mutant: expiry-on-payload-horizon
  const horizonDays = deps.settings.retention.keyDays;
  if (event.signedAt && now.getTime() - event.signedAt.getTime() > horizonDays * 86_400_000) {
    log.warn({ signedAt: event.signedAt, horizonDays }, 'delivery older than the key retention horizon; not processed');
    return answer(
      'expired',
      typeLabel(event.type),
      c.json(
        {
          status: 'expired',
          ...sourceFields(event.source),
          eventId: event.eventId,
          message: `event was created ${event.signedAt.toISOString()}, beyond the ${horizonDays}-day key retention horizon (KEY_RETENTION_DAYS); not processed`,
        },
        200,
      ),
    );
  }

  // A request pipelined behind an answer that closed its connection (an early refusal): its
  // own answer could never reach the sender, so it must not be stored either (the sender
  // retries it, and then it is new, not a duplicate nobody was told about).
  // mutant: pipelined-after-refusal-processed
  if (edge.connectionClosing(c)) {
    log.info('delivery pipelined behind a refusal that closes its connection; not processed (the sender will retry it)');
    return answer(
      'error',
      typeLabel(event.type),
      edge.closing(c, c.json({ error: 'connection_closing', message: 'an earlier request on this connection was refused; send this one again' }, 503)),
    );
  }

  // 2. Claim (and, if new, enqueue), grouped with concurrent deliveries into one statement
  //    and one Redis round trip (claim-batcher.ts). Resolves after the claim has committed.
  let claim: ClaimResult;
  try {
    // The delivery's trace goes with the event: the dispatch job continues it.
    const traceparent = currentTraceparent();
    // mutant: ack-before-commit
    claim = await claims.claim(traceparent ? { ...event, traceparent } : event);
  } catch (error) {
    if (isUnstorablePayloadError(error)) {
      edge.rejected(source.name, 'unstorable_payload', 400, `payload cannot be stored: ${(error as Error).message}`);
      return answer('rejected', typeLabel(event.type), c.json({ error: 'unstorable_payload', message: `payload cannot be stored: ${(error as Error).message}` }, 400));
    }
    const unavailable = error instanceof OverloadedError || isDatabaseUnavailableError(error);
    if (!(error instanceof OverloadedError)) log.error({ err: error }, unavailable ? 'database unavailable; asking the provider to retry' : 'claim failed');
    c.header('Retry-After', String(deps.settings.retryAfterSeconds));
    // A database that failed mid-statement may have committed it: never claim nothing was stored.
    const message =
      error instanceof OverloadedError
        ? error.message
        : unavailable
          ? 'the database is unavailable; retry later (if this delivery was recorded after all, the retry is answered as a duplicate)'
          : 'the event could not be recorded; retry later';
    return answer('error', typeLabel(event.type), c.json({ error: 'unavailable', message }, unavailable ? 503 : 500));
  }

  if (claim.outcome === 'new') {
    log.info({ rowId: claim.rowId }, 'claimed new event');
    return answer('new', typeLabel(event.type), c.json({ status: 'accepted', ...sourceFields(event.source), eventId: event.eventId }, 202));
  }

  // Duplicate: counted as such, never as an error, under the STORED event's type.
  await onDuplicate(deps, path.relay, edge, source.name, event, claim, now, log);
  const storedType = claim.outcome === 'duplicate' ? claim.type : event.type;
  return answer('duplicate', typeLabel(storedType), c.json({ status: 'duplicate', ...sourceFields(event.source), eventId: event.eventId }, 200));
}

/** A duplicate's bookkeeping: the recent-duplicates view, the log, a lost enqueue repeated. */
async function onDuplicate(
  deps: WebhookDeps,
  relay: EnqueueRelay,
  edge: EdgeGuards,
  sourceName: string,
  event: VerifiedEvent,
  claim: Exclude<ClaimResult, { outcome: 'new' }>,
  now: Date,
  log: Logger,
): Promise<void> {
  deps.recentDuplicates?.add({
    at: now,
    source: event.source,
    eventId: event.eventId,
    rowId: claim.outcome === 'duplicate' ? claim.rowId : null,
    state: claim.outcome === 'duplicate' ? claim.state : null,
  });
  if (claim.outcome === 'duplicate') {
    log.info(
      { rowId: claim.rowId, state: claim.state, sameBody: claim.sameBody },
      claim.sameBody ? 'duplicate delivery (same body as a claimed event, under another id)' : 'duplicate delivery',
    );
    if (claim.sameBody && claim.type !== event.type) {
      // Either a captured body replayed under another type, or a sender that sends one body for
      // two types (docs/providers.md, body dedupe): say so, it is never silent.
      edge.notice(
        `${sourceName}\0cross-type`,
        { source: event.source, eventId: event.eventId, type: event.type, storedType: claim.type, rowId: claim.rowId },
        'a body already claimed under another id AND another type was answered duplicate: a replay, or a sender that sends byte-identical bodies for two types (see bodyDedupe in docs/providers.md)',
      );
    }
    const idleMs = Date.now() - claim.updatedAt.getTime();
    if (claim.state === 'received' && idleMs >= deps.settings.duplicateReenqueueAfterMs && !claim.sameBody) {
      // Still not dispatched after the grace period: the original enqueue may have been lost.
      // Safe to repeat: the jobId dedupes a queued job and the worker's guarded dispatch the rest.
      log.info({ rowId: claim.rowId, idleMs }, 'duplicate found the event still received; re-enqueueing its dispatch');
      // mutant: stale-duplicate-not-nudged
      relay.nudge({ rowId: claim.rowId, source: event.source, eventId: event.eventId, kind: event.kind, type: claim.type, attempt: 0 });
    }
  } else {
    log.info('duplicate delivery (concurrent with the first)');
  }
}

/** A direct answer: JSON, text (a challenge echoed as the sender wants it) or an empty 204. */
export function replyResponse(c: Context, reply: Reply): Response {
  if (reply.body === null) return c.body(null, (reply.status ?? 204) as 204);
  if (typeof reply.body === 'string') return c.text(reply.body, (reply.status ?? 200) as 200);
  return c.json(reply.body, (reply.status ?? 200) as 200);
}

type Answer = (result: EdgeResult, type: string, response: Response) => Response;
type Timed = (result: EdgeResult, response: Response) => Response;

/**
 * Many events in one delivery: each element claimed on its own (the claim batcher groups them
 * into one statement), the answer after all of them committed.
 */
async function receiveBatch(
  c: Context,
  deps: WebhookDeps,
  path: DeliveryPath,
  edge: EdgeGuards,
  events: VerifiedEvent[],
  now: Date,
  answer: Answer,
  timed: Timed,
): Promise<Response> {
  const first = events[0]!;
  const typeLabel = (type: string) => deps.typeLabels?.label(first.source, first.kind, type) ?? 'other';
  const log = deps.log.child({ source: first.source, batch: events.length });
  if (edge.connectionClosing(c)) {
    return answer(
      'error',
      'other',
      edge.closing(c, c.json({ error: 'connection_closing', message: 'an earlier request on this connection was refused; send this one again' }, 503)),
    );
  }
  const horizonMs = deps.settings.retention.keyDays * 86_400_000;
  const traceparent = currentTraceparent();
  const claimOne = async (event: VerifiedEvent) => {
    // An element past the key horizon is not claimed (as a single delivery would be `expired`).
    if (event.signedAt && now.getTime() - event.signedAt.getTime() > horizonMs) return 'expired' as const;
    // mutant: batch-answer-before-commit
    const claim = await path.claims.claim(traceparent ? { ...event, traceparent } : event);
    if (claim.outcome !== 'new') await onDuplicate(deps, path.relay, edge, event.source, event, claim, now, log);
    return claim.outcome === 'new' ? ('accepted' as const) : ('duplicate' as const);
  };
  // In chunks, so that one large batch (SendGrid's reach thousands of events) never fills the
  // claim batcher's waiting room (MAX_WAITING_CLAIMS) by itself and is refused for ever.
  // mutant: batch-unchunked
  const chunk = Math.max(1, Math.min(100, Math.floor(deps.settings.maxWaitingClaims / 4)));
  const outcomes: PromiseSettledResult<'accepted' | 'duplicate' | 'expired'>[] = [];
  for (let start = 0; start < events.length; start += chunk) {
    // mutant: batch-first-element-only
    outcomes.push(...(await Promise.allSettled(events.slice(start, start + chunk).map(claimOne))));
  }
  const failed = outcomes.findIndex((outcome) => outcome.status === 'rejected');
  if (failed !== -1) {
    const error = (outcomes[failed] as PromiseRejectedResult).reason;
    const eventId = events[failed]!.eventId;
    if (isUnstorablePayloadError(error)) {
      const message = `element #${failed + 1} (${eventId}) cannot be stored: ${(error as Error).message}; the other elements were claimed`;
      edge.rejected(first.source, 'unstorable_payload', 400, message);
      return answer('rejected', 'other', c.json({ error: 'unstorable_payload', message }, 400));
    }
    const unavailable = error instanceof OverloadedError || isDatabaseUnavailableError(error);
    if (!(error instanceof OverloadedError)) log.error({ err: error, eventId }, unavailable ? 'database unavailable; asking the provider to retry the batch' : 'claim failed');
    c.header('Retry-After', String(deps.settings.retryAfterSeconds));
    return answer(
      'error',
      'other',
      c.json(
        { error: 'unavailable', message: 'not every element of the batch could be recorded; retry later (elements already recorded are then answered as duplicates)' },
        unavailable ? 503 : 500,
      ),
    );
  }
  const statuses = outcomes.map((outcome) => (outcome as PromiseFulfilledResult<'accepted' | 'duplicate' | 'expired'>).value);
  events.forEach((event, i) => {
    const status = statuses[i]!;
    deps.metrics.eventsTotal.inc({ ...sourceFields(event.source), type: typeLabel(event.type), result: status === 'accepted' ? 'new' : status });
  });
  const accepted = statuses.filter((status) => status === 'accepted').length;
  log.info({ accepted, duplicates: statuses.filter((status) => status === 'duplicate').length }, 'batch delivery claimed');
  const body = {
    status: accepted > 0 ? 'accepted' : 'duplicate',
    ...sourceFields(first.source),
    events: events.map((event, i) => ({ eventId: event.eventId, status: statuses[i] })),
  };
  trace.getActiveSpan()?.setAttribute('oncehook.batch_size', events.length);
  return timed(accepted > 0 ? 'new' : 'duplicate', c.json(body, accepted > 0 ? 202 : 200));
}
