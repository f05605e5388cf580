/**
 * What the edge checks before it reads a byte of a delivery's body, so that no request it will
 * refuse can cost it memory or time:
 *
 *   unknown source                                   404
 *   signature headers missing or malformed           400 (the source's precheck)
 *   Content-Length over BODY_LIMIT_BYTES             413
 *   more body bytes in flight than allowed           503 + Retry-After (MAX_INFLIGHT_BODY_BYTES)
 *   the database is down (the claim circuit is open) 503 + Retry-After: nothing could be
 *                                                    stored, so the body is not even read
 *
 * Each of these answers closes the connection (`Connection: close`): the unread body is never
 * buffered, and a slow sender cannot keep the socket. Bytes are reserved from Content-Length
 * (or BODY_LIMIT_BYTES for a chunked body) until the delivery is answered, so the bodies held
 * by deliveries in progress (being read, verified, waiting for their claim) never exceed the
 * budget, whatever arrives. Slow senders that pass these checks are cut by the server's
 * REQUEST_TIMEOUT_MS.
 *
 * Rejected deliveries are logged at warn, at most 5 lines per source and reason per 10 s
 * (with the count of lines suppressed): a flood of forgeries cannot flood the logs.
 */
import { createLogLimiter, VerificationError } from '@oncehook/shared';
import type { Context, MiddlewareHandler } from 'hono';
import type { IngestDeps } from './app';

export interface EdgeGuards {
  beforeBody: MiddlewareHandler;
  /** Marks a response as the last on its connection. */
  closing(response: Response): Response;
  /** Counts and logs (rate-limited) a refused delivery. */
  rejected(provider: string, reason: string, status: number, message: string): void;
  /** A warn line, rate-limited like the rejections (same key: at most 5 per 10 s). */
  notice(key: string, fields: Record<string, unknown>, message: string): void;
  /** Bytes reserved by deliveries in progress (for tests and metrics). */
  readonly inflightBytes: number;
}

export function createEdgeGuards(deps: IngestDeps, claims: { readonly circuit: 'closed' | 'open' | 'half-open' }): EdgeGuards {
  const { settings, metrics } = deps;
  const limit = createLogLimiter({ windowMs: 10_000, perWindow: 5 });
  let inflight = 0;

  const closing = (response: Response): Response => {
    response.headers.set('Connection', 'close');
    return response;
  };

  const rejected = (provider: string, reason: string, status: number, message: string) => {
    metrics.rejectionsTotal.inc({ provider, reason });
    const { log, suppressed } = limit(`${provider}\0${reason}`);
    if (log) deps.log.warn({ provider, reason, status, ...(suppressed > 0 ? { suppressed } : {}) }, `rejected delivery: ${message}`);
  };

  const notice = (key: string, fields: Record<string, unknown>, message: string) => {
    const { log, suppressed } = limit(key);
    if (log) deps.log.warn({ ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, message);
  };

  const beforeBody: MiddlewareHandler = async (c: Context, next) => {
    const started = process.hrtime.bigint();
    const name = c.req.param('provider') ?? '';
    const source = deps.sources.get(name);
    if (!source) return closing(c.json({ error: 'unknown_provider', message: `no webhook source named "${name}" is configured` }, 404));
    const answered = (result: 'rejected' | 'error', response: Response) => {
      metrics.eventsTotal.inc({ provider: source.name, type: 'unknown', result });
      metrics.ingestDuration.observe({ result }, Number(process.hrtime.bigint() - started) / 1e9);
      return closing(response);
    };

    try {
      source.precheck((header) => c.req.header(header) ?? null);
    } catch (error) {
      if (!(error instanceof VerificationError)) throw error;
      rejected(source.name, error.reason, error.status, error.message);
      return answered('rejected', c.json({ error: error.reason, message: error.message }, error.status));
    }

    const declared = c.req.header('content-length');
    const length = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
    if (length !== null && length > settings.bodyLimitBytes) {
      rejected(source.name, 'payload_too_large', 413, `body of ${length} bytes`);
      return answered('rejected', c.json({ error: 'payload_too_large', message: `request body exceeds ${settings.bodyLimitBytes} bytes (BODY_LIMIT_BYTES)` }, 413));
    }
    if (claims.circuit === 'open') {
      c.header('Retry-After', String(settings.retryAfterSeconds));
      rejected(source.name, 'database_unavailable', 503, 'the claim circuit is open');
      return answered(
        'error',
        c.json({ error: 'unavailable', message: 'ingest cannot record deliveries right now: the database is unavailable; nothing was stored, retry later' }, 503),
      );
    }
    const reserve = length ?? settings.bodyLimitBytes;
    if (inflight + reserve > settings.maxInflightBodyBytes) {
      c.header('Retry-After', String(settings.retryAfterSeconds));
      rejected(source.name, 'overloaded', 503, `${inflight} body bytes in flight`);
      return answered('error', c.json({ error: 'overloaded', message: 'too many deliveries in progress; nothing was stored, retry later' }, 503));
    }
    inflight += reserve;
    try {
      await next();
    } finally {
      inflight -= reserve;
    }
  };

  return {
    beforeBody,
    closing,
    rejected,
    notice,
    get inflightBytes() {
      return inflight;
    },
  };
}
