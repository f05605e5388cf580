/**
 * Oncehook's outbound HTTP client, for a handler's external steps (exported by @oncehook/sdk
 * as `createOutboundClient`; the example's payment, email and fulfilment clients use it).
 *
 * - Sends the idempotency key the step hands in: as the `Idempotency-Key` header, or as a
 *   field of the JSON body (`idempotencyKeyField`) for APIs that dedupe on one.
 * - Times out each try (`timeoutMs`).
 * - Retries network errors, timeouts, 409 (the same key is still in flight: Stripe's
 *   semantics), 429 and 5xx, with exponential backoff and full jitter, honouring Retry-After
 *   (capped at `maxDelayMs`). Retrying is safe only because the key makes the request
 *   idempotent: never call this without one for an effect.
 * - Never retries any other 4xx: it throws PermanentError, which ends the handler's run
 *   `failed` (retrying a bad request cannot succeed).
 * - When tries run out on a retryable failure it throws OutboundUnavailableError: the step
 *   fails, the run is retried later by the worker with the SAME key.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { backoffDelayMs } from './backoff.js';
import { OutboundUnavailableError, PermanentError } from './errors.js';
import { tracer } from './tracer.js';

export interface OutboundClientOptions {
  /** Name used in errors and metrics (payment, email, fulfilment). */
  name: string;
  /** Prepended to every request's `path` (`https://api.example.com/v1`). */
  baseUrl: string;
  /** Per-try timeout (default 10 000 ms); a timed-out try is retried. */
  timeoutMs?: number;
  /** Tries in all, first included (default 4). */
  maxTries?: number;
  /** First delay between tries (default 200 ms); doubles per try with full jitter. */
  baseDelayMs?: number;
  /** Longest delay between tries (default 5 000 ms); a longer `Retry-After` is capped to it. */
  maxDelayMs?: number;
  /** Extra headers on every request (API keys). */
  headers?: Record<string, string>;
  /** Called once per try with its outcome (for metrics). */
  onOutcome?: (outcome: OutboundOutcome) => void;
}

export type OutboundOutcome = {
  name: string;
  result: 'ok' | 'retryable' | 'permanent' | 'network_error' | 'timeout';
  status?: number;
  method: string;
  url: string;
  /** The idempotency key sent (header or body field), if any. */
  idempotencyKey: string | null;
  durationMs: number;
};

/**
 * The observers, on globalThis under a key every copy of the SDK shares: the worker observes
 * through its copy, a handler module may call through its own, and every try must be seen.
 */
// mutant: outbound-observers-per-copy
const OBSERVERS = Symbol.for('oncehook.outbound.observers');
type Observer = (outcome: OutboundOutcome) => void;
const shared = globalThis as { [OBSERVERS]?: Set<Observer> };
shared[OBSERVERS] ??= new Set<Observer>();
const observers: Set<Observer> = shared[OBSERVERS];

/**
 * Observes every try of every outbound client in this process (the worker counts them in
 * webhook_outbound_calls_total; the test kit records the keys each step sent). Returns the
 * function that stops observing. Observers must not throw.
 */
export function observeOutbound(observer: (outcome: OutboundOutcome) => void): () => void {
  observers.add(observer);
  return () => observers.delete(observer);
}

export interface OutboundRequest {
  method: 'POST' | 'GET' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  /** The step's idempotency key: sent as the Idempotency-Key header, or in the body (below). */
  idempotencyKey?: string;
  /** Send the key as this field of the JSON body instead of the header (email APIs' `dedupe_key`). */
  idempotencyKeyField?: string;
  signal?: AbortSignal;
}

export interface OutboundResponse<T> {
  status: number;
  body: T;
  headers: Headers;
}

/** Retry-After as milliseconds (delta-seconds or an HTTP date), or null. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number.parseInt(value, 10) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

const RETRYABLE_STATUS = (status: number) => status === 409 || status === 429 || status >= 500;

export interface OutboundClient {
  request<T = unknown>(request: OutboundRequest): Promise<OutboundResponse<T>>;
}

export function createOutboundClient(options: OutboundClientOptions): OutboundClient {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxTries = options.maxTries ?? 4;
  const baseDelayMs = options.baseDelayMs ?? 200;
  const maxDelayMs = options.maxDelayMs ?? 5_000;
  const report = (outcome: OutboundOutcome) => {
    options.onOutcome?.(outcome);
    for (const observer of observers) observer(outcome);
  };

  // Full jitter between quick tries; a Retry-After the API asked for wins (up to maxDelayMs).
  const backoff = (attempt: number, retryAfterMs: number | null) =>
    Math.min(maxDelayMs, Math.max(backoffDelayMs(attempt, { baseMs: baseDelayMs, capMs: maxDelayMs, jitter: 'full' }), retryAfterMs ?? 0));

  return {
    async request<T>(req: OutboundRequest): Promise<OutboundResponse<T>> {
      const url = new URL(req.path.replace(/^\//, ''), options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
      const requestBody =
        req.idempotencyKeyField && req.idempotencyKey ? { ...(req.body as Record<string, unknown> | undefined), [req.idempotencyKeyField]: req.idempotencyKey } : req.body;
      let lastProblem = '';
      let lastStatus: number | undefined;
      for (let attempt = 1; attempt <= maxTries; attempt += 1) {
        if (req.signal?.aborted) throw req.signal.reason instanceof Error ? req.signal.reason : new Error('aborted');
        let retryAfterMs: number | null = null;
        const timeout = AbortSignal.timeout(timeoutMs);
        const startedAt = performance.now();
        // One client span per try, a child of the step's span (tracing.ts); its context goes out
        // as the `traceparent` header, so a traced API joins the trace.
        const span = tracer().startSpan(`outbound ${options.name}`, {
          kind: SpanKind.CLIENT,
          attributes: { 'http.request.method': req.method, 'url.full': url.toString(), 'oncehook.idempotency_key': req.idempotencyKey ?? '', 'oncehook.try': attempt },
        });
        const traceHeaders: Record<string, string> = {};
        propagation.inject(trace.setSpan(context.active(), span), traceHeaders);
        const finish = (outcome: OutboundOutcome) => {
          span.setAttributes({ 'oncehook.outbound.result': outcome.result, ...(outcome.status ? { 'http.response.status_code': outcome.status } : {}) });
          if (outcome.result !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.result });
          span.end();
          report(outcome);
        };
        const tried = () => ({
          name: options.name,
          method: req.method,
          url: url.toString(),
          idempotencyKey: req.idempotencyKey ?? null,
          durationMs: performance.now() - startedAt,
        });
        try {
          const response = await fetch(url, {
            method: req.method,
            headers: {
              'content-type': 'application/json',
              ...traceHeaders,
              ...options.headers,
              ...(req.idempotencyKey && !req.idempotencyKeyField ? { 'idempotency-key': req.idempotencyKey } : {}),
            },
            body: requestBody === undefined ? undefined : JSON.stringify(requestBody),
            signal: req.signal ? AbortSignal.any([timeout, req.signal]) : timeout,
          });
          const text = await response.text();
          let body: unknown = text;
          try {
            body = text ? JSON.parse(text) : null;
          } catch {
            /* keep the text */
          }
          if (response.ok) {
            finish({ ...tried(), result: 'ok', status: response.status });
            return { status: response.status, body: body as T, headers: response.headers };
          }
          const detail = typeof body === 'string' ? body.slice(0, 300) : JSON.stringify(body).slice(0, 300);
          if (!RETRYABLE_STATUS(response.status)) {
            finish({ ...tried(), result: 'permanent', status: response.status });
            throw new PermanentError(`${options.name} API answered ${response.status} to ${req.method} ${url.pathname}: ${detail}`);
          }
          finish({ ...tried(), result: 'retryable', status: response.status });
          lastProblem = `${response.status}: ${detail}`;
          lastStatus = response.status;
          retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
        } catch (error) {
          if (error instanceof PermanentError) throw error;
          if (req.signal?.aborted) throw req.signal.reason instanceof Error ? req.signal.reason : error;
          const timedOut = timeout.aborted;
          finish({ ...tried(), result: timedOut ? 'timeout' : 'network_error' });
          lastProblem = timedOut
            ? `timed out after ${timeoutMs}ms`
            : `network error: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`;
          lastStatus = undefined;
        }
        if (attempt < maxTries) await new Promise((resolve) => setTimeout(resolve, backoff(attempt, retryAfterMs)));
      }
      throw new OutboundUnavailableError(`${options.name} API: ${req.method} ${url.pathname} failed ${maxTries} times; last: ${lastProblem}`, lastStatus);
    },
  };
}
