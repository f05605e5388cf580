/**
 * The outbound HTTP client every effect goes through (payment, email, fulfilment).
 *
 * - Sends the idempotency key the step hands in (header or body field, per API).
 * - Times out each try (`timeoutMs`).
 * - Retries network errors, timeouts, 409 (the same key is still in flight: Stripe's
 *   semantics), 429 and 5xx, with exponential backoff and full jitter, honouring Retry-After
 *   (capped at `maxDelayMs`). Retrying is safe only because the key makes the request
 *   idempotent: never call this without one for an effect.
 * - Never retries any other 4xx: it throws PermanentError, which ends the event `failed`
 *   (retrying a bad request cannot succeed).
 * - When tries run out on a retryable failure it throws OutboundUnavailableError: the step
 *   fails, the event is retried later by the worker with the SAME key.
 */
import { PermanentError } from '../errors';

export interface OutboundClientOptions {
  /** Name used in errors and metrics (payment, email, fulfilment). */
  name: string;
  baseUrl: string;
  timeoutMs?: number;
  /** Tries in all, first included. */
  maxTries?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Extra headers on every request (API keys). */
  headers?: Record<string, string>;
  /** Called once per try with its outcome (for metrics). */
  onOutcome?: (outcome: OutboundOutcome) => void;
}

export type OutboundOutcome = { name: string; result: 'ok' | 'retryable' | 'permanent' | 'network_error' | 'timeout'; status?: number };

export interface OutboundRequest {
  method: 'POST' | 'GET' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  /** Sent as the Idempotency-Key header when given. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface OutboundResponse<T> {
  status: number;
  body: T;
  headers: Headers;
}

/** Retryable failure that outlived our tries: the step fails and the event is retried later. */
export class OutboundUnavailableError extends Error {
  override name = 'OutboundUnavailableError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
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
  const report = options.onOutcome ?? (() => {});

  const backoff = (attempt: number, retryAfterMs: number | null) => {
    const exponential = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
    const jittered = Math.random() * exponential; // full jitter
    return Math.min(maxDelayMs, Math.max(jittered, retryAfterMs ?? 0));
  };

  return {
    async request<T>(req: OutboundRequest): Promise<OutboundResponse<T>> {
      const url = new URL(req.path.replace(/^\//, ''), options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
      let lastProblem = '';
      let lastStatus: number | undefined;
      for (let attempt = 1; attempt <= maxTries; attempt += 1) {
        if (req.signal?.aborted) throw req.signal.reason instanceof Error ? req.signal.reason : new Error('aborted');
        let retryAfterMs: number | null = null;
        const timeout = AbortSignal.timeout(timeoutMs);
        try {
          const response = await fetch(url, {
            method: req.method,
            headers: {
              'content-type': 'application/json',
              ...options.headers,
              ...(req.idempotencyKey ? { 'idempotency-key': req.idempotencyKey } : {}),
            },
            body: req.body === undefined ? undefined : JSON.stringify(req.body),
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
            report({ name: options.name, result: 'ok', status: response.status });
            return { status: response.status, body: body as T, headers: response.headers };
          }
          const detail = typeof body === 'string' ? body.slice(0, 300) : JSON.stringify(body).slice(0, 300);
          if (!RETRYABLE_STATUS(response.status)) {
            report({ name: options.name, result: 'permanent', status: response.status });
            throw new PermanentError(`${options.name} API answered ${response.status} to ${req.method} ${url.pathname}: ${detail}`);
          }
          report({ name: options.name, result: 'retryable', status: response.status });
          lastProblem = `${response.status}: ${detail}`;
          lastStatus = response.status;
          retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
        } catch (error) {
          if (error instanceof PermanentError) throw error;
          if (req.signal?.aborted) throw req.signal.reason instanceof Error ? req.signal.reason : error;
          const timedOut = timeout.aborted;
          report({ name: options.name, result: timedOut ? 'timeout' : 'network_error' });
          lastProblem = timedOut ? `timed out after ${timeoutMs}ms` : `network error: ${(error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message}`;
          lastStatus = undefined;
        }
        if (attempt < maxTries) await new Promise((resolve) => setTimeout(resolve, backoff(attempt, retryAfterMs)));
      }
      throw new OutboundUnavailableError(`${options.name} API: ${req.method} ${url.pathname} failed ${maxTries} times; last: ${lastProblem}`, lastStatus);
    },
  };
}
