/**
 * What the edge checks before it reads a byte of a delivery's body, so that no request it will
 * refuse costs it memory or time: an unknown source (404), missing or malformed signature
 * headers or a signed timestamp out of tolerance (400/401, the source's precheck), a declared
 * body over BODY_LIMIT_BYTES (413), over what the body budget has left or with the claim
 * circuit open (503 + Retry-After). Each of these answers closes the connection. The body
 * budget counts the bytes that have arrived, as they arrive (readBody). docs/security.md says
 * which attack each bound answers.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpBindings } from '@hono/node-server';
import { createLogLimiter, sourceFields, VerificationError, type IngestMetrics, type Logger } from '@oncehook/shared';
import type { WebhookSource } from '@oncehook/providers';
import type { Context, MiddlewareHandler } from 'hono';
import type { IngestSettings } from './ingest-settings.js';

/** What the edge reads: the sources, its bounds, where it counts and logs refusals. */
export interface EdgeDeps {
  sources: ReadonlyMap<string, WebhookSource>;
  settings: Pick<IngestSettings, 'bodyLimitBytes' | 'maxInflightBodyBytes' | 'retryAfterSeconds'>;
  metrics: IngestMetrics;
  log: Logger;
  now?: () => Date;
}

export interface EdgeGuards {
  beforeBody: MiddlewareHandler;
  /**
   * Reads the delivery's body, counting its bytes into the budget as they arrive (released when
   * the delivery is answered). A Response instead: the body was refused while it arrived (413
   * over BODY_LIMIT_BYTES, 503 over the budget) or could not be read.
   */
  readBody(c: Context): Promise<Buffer | Response>;
  /**
   * True when an earlier request on this connection was answered with `Connection: close`: this
   * one was pipelined behind it, and its answer could never be sent. It must not be processed.
   */
  connectionClosing(c: Context): boolean;
  /** Marks a response as the last on its connection. */
  closing(c: Context, response: Response): Response;
  /** Counts and logs (rate-limited) a refused delivery. */
  rejected(source: string, reason: string, status: number, message: string): void;
  /** A warn line, rate-limited like the rejections (same key: at most 5 per 10 s). */
  notice(key: string, fields: Record<string, unknown>, message: string): void;
  /** Body bytes held by deliveries in progress (for tests and metrics). */
  readonly inflightBytes: number;
}

/** The Node request under @hono/node-server; absent under `app.request()`. */
function incomingOf(c: Context): IncomingMessage | undefined {
  const env = c.env as Partial<HttpBindings> | undefined;
  return env?.incoming;
}

export function createEdgeGuards(deps: EdgeDeps, claims: { readonly circuit: 'closed' | 'open' | 'half-open' }): EdgeGuards {
  const { settings, metrics } = deps;
  const limit = createLogLimiter({ windowMs: 10_000, perWindow: 5 });
  let inflight = 0;
  /** Per delivery in progress: the body bytes it holds in the budget. */
  const held = new WeakMap<Context, { bytes: number }>();
  /** Connections whose last answer said `Connection: close`. */
  const closingSockets = new WeakSet<Socket>();

  const closing = (c: Context, response: Response): Response => {
    response.headers.set('Connection', 'close');
    const socket = incomingOf(c)?.socket;
    if (socket) closingSockets.add(socket);
    return response;
  };

  const rejected = (source: string, reason: string, status: number, message: string) => {
    metrics.rejectionsTotal.inc({ ...sourceFields(source), reason });
    const { log, suppressed } = limit(`${source}\0${reason}`);
    if (log) deps.log.warn({ source, reason, status, ...(suppressed > 0 ? { suppressed } : {}) }, `rejected delivery: ${message}`);
  };

  const notice = (key: string, fields: Record<string, unknown>, message: string) => {
    const { log, suppressed } = limit(key);
    if (log) deps.log.warn({ ...fields, ...(suppressed > 0 ? { suppressed } : {}) }, message);
  };

  const overBudget = (c: Context) => {
    c.header('Retry-After', String(settings.retryAfterSeconds));
    return c.json({ error: 'overloaded', message: 'too many deliveries in progress; nothing was stored, retry later' }, 503);
  };
  const tooLarge = (c: Context) => c.json({ error: 'payload_too_large', message: `request body exceeds ${settings.bodyLimitBytes} bytes (BODY_LIMIT_BYTES)` }, 413);

  const beforeBody: MiddlewareHandler = async (c: Context, next) => {
    const started = process.hrtime.bigint();
    const name = c.req.param('source') ?? '';
    const source = deps.sources.get(name);
    if (!source) return closing(c, c.json({ error: 'unknown_provider', message: `no webhook source named "${name}" is configured` }, 404));
    const answered = (result: 'rejected' | 'error', response: Response) => {
      metrics.eventsTotal.inc({ ...sourceFields(source.name), type: 'unknown', result });
      metrics.ingestDuration.observe({ result }, Number(process.hrtime.bigint() - started) / 1e9);
      return closing(c, response);
    };

    try {
      // mutant: precheck-off
      source.precheck((header) => c.req.header(header) ?? null, deps.now?.() ?? new Date());
    } catch (error) {
      if (!(error instanceof VerificationError)) throw error;
      rejected(source.name, error.reason, error.status, error.message);
      return answered('rejected', c.json({ error: error.reason, message: error.message }, error.status));
    }

    const declared = c.req.header('content-length');
    const length = declared !== undefined && /^\d{1,15}$/.test(declared) ? Number(declared) : null;
    if (length !== null && length > settings.bodyLimitBytes) {
      rejected(source.name, 'payload_too_large', 413, `body of ${length} bytes`);
      return answered('rejected', tooLarge(c));
    }
    if (claims.circuit === 'open') {
      c.header('Retry-After', String(settings.retryAfterSeconds));
      rejected(source.name, 'database_unavailable', 503, 'the claim circuit is open');
      return answered(
        'error',
        c.json({ error: 'unavailable', message: 'ingest cannot record deliveries right now: the database is unavailable; nothing was stored, retry later' }, 503),
      );
    }
    // A declared body that cannot fit in what the budget has left is refused before reading.
    // mutant: inflight-budget-off
    if (length !== null && inflight + length > settings.maxInflightBodyBytes) {
      rejected(source.name, 'overloaded', 503, `${inflight} body bytes in flight`);
      return answered('error', overBudget(c));
    }
    // mutant: body-budget-reserves-declared
    const mine = { bytes: 0 };
    held.set(c, mine);
    try {
      await next();
    } finally {
      inflight -= mine.bytes;
      if (mine.bytes > 0) metrics.inflightBodyBytes.set(inflight);
    }
  };

  async function readBody(c: Context): Promise<Buffer | Response> {
    const mine = held.get(c);
    if (!mine) throw new Error('readBody called without beforeBody');
    const source = c.req.param('source') ?? '';
    const take = (bytes: number): 'ok' | 'too-large' | 'over-budget' => {
      // mutant: chunked-body-unlimited
      if (mine.bytes + bytes > settings.bodyLimitBytes) return 'too-large';
      if (inflight + bytes > settings.maxInflightBodyBytes) return 'over-budget';
      inflight += bytes;
      mine.bytes += bytes;
      metrics.inflightBodyBytes.set(inflight);
      return 'ok';
    };
    const refuse = (why: 'too-large' | 'over-budget') => {
      metrics.eventsTotal.inc({ ...sourceFields(source), type: 'unknown', result: why === 'too-large' ? 'rejected' : 'error' });
      rejected(source, why === 'too-large' ? 'payload_too_large' : 'overloaded', why === 'too-large' ? 413 : 503, `body refused while it arrived (${mine.bytes} bytes read)`);
      return closing(c, why === 'too-large' ? tooLarge(c) : overBudget(c));
    };
    const unreadable = (error: unknown) => {
      // The sender went away (or the server's request timeout cut it) mid-body: nobody is
      // listening for an answer; not worth more than a debug line.
      deps.log.debug({ source, err: error }, 'request body could not be read (client aborted or timed out)');
      return closing(c, c.json({ error: 'body_unreadable', message: 'the request body could not be read' }, 400));
    };

    const incoming = incomingOf(c);
    if (!incoming) {
      // app.request() in tests: the body is already in memory; count it the same way.
      let body: Buffer;
      try {
        body = Buffer.from(await c.req.arrayBuffer());
      } catch (error) {
        return unreadable(error);
      }
      const taken = take(body.length);
      return taken === 'ok' ? body : refuse(taken);
    }
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of incoming as AsyncIterable<Buffer>) {
        const taken = take(chunk.length);
        if (taken !== 'ok') return refuse(taken);
        chunks.push(chunk);
      }
    } catch (error) {
      return unreadable(error);
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, mine.bytes);
  }

  return {
    beforeBody,
    readBody,
    connectionClosing: (c) => {
      const socket = incomingOf(c)?.socket;
      return socket !== undefined && closingSockets.has(socket);
    },
    closing,
    rejected,
    notice,
    get inflightBytes() {
      return inflight;
    },
  };
}
