/**
 * Stripe's events API and its webhook deliveries, as the sandbox plays them (what `oncehook
 * backfill stripe` reads, driven in the tests by Stripe's own client):
 *
 *   GET  /v1/events                 Stripe's own path (its client has a host and a port, no
 *                                   base path); Bearer key; created[gte|gt|lte|lt], delivery_success,
 *                                   type or types[n], limit (1-100, default 10),
 *                                   starting_after / ending_before; newest first; a list object
 *                                   with has_more. 401 for another key, 400 for a bad parameter
 *                                   (Stripe's error shape), 429 with Retry-After or 500 when a
 *                                   fault says so.
 *   POST /stripe/_endpoint          {url, secret}: where events are delivered (a webhook
 *                                   endpoint), signed as Stripe signs (t=..,v1=HMAC-SHA256 of
 *                                   `t.body` keyed with the whole whsec_ secret)
 *   POST /stripe/_events            {events: [event objects], deliver?: true}: stored (and
 *                                   delivered once each); answers which deliveries failed
 *   POST /stripe/_redeliver         {ids?}: delivers those events again (all when absent),
 *                                   as Stripe's automatic retries do; a 2xx marks it delivered
 *   POST /stripe/_faults            {status: 429|500, times, retryAfter?, after?}: after `after`
 *                                   list calls answered normally, the next `times` answer that
 *                                   status; DELETE clears them
 *   GET  /stripe/_stats             list calls made, faults answered, deliveries attempted
 *
 * `delivery_success=false` lists the events whose deliveries all failed (or never happened),
 * as Stripe's "pending or failed all delivery attempts".
 */
import { createHmac } from 'node:crypto';
import type { Hono } from 'hono';

interface StoredEvent {
  event: Record<string, unknown> & { id: string; created: number; type: string };
  body: string;
  delivered: boolean;
  attempts: number;
  seq: number;
}

export const SANDBOX_STRIPE_API_KEY = 'rk_test_oncehooksandbox00000001';

function stripeError(type: string, message: string, param?: string) {
  return { error: { type, message, ...(param ? { param } : {}) } };
}

export function createStripeEventsApi() {
  let events: StoredEvent[] = [];
  let endpoint: { url: string; secret: string } | null = null;
  let faults: { status: number; times: number; retryAfter: number | null; after: number }[] = [];
  const stats = { listCalls: 0, faultsAnswered: 0, deliveries: 0, deliveryFailures: 0 };
  let seq = 0;

  async function deliver(stored: StoredEvent): Promise<boolean> {
    if (!endpoint) return false;
    stored.attempts += 1;
    stats.deliveries += 1;
    const t = Math.floor(Date.now() / 1000);
    const signature = createHmac('sha256', endpoint.secret).update(`${t}.${stored.body}`).digest('hex');
    try {
      const response = await fetch(endpoint.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${signature}` },
        body: stored.body,
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.status >= 200 && response.status < 300) {
        stored.delivered = true;
        return true;
      }
    } catch {
      // Not delivered: the endpoint is down, refused or too slow, as Stripe would see it.
    }
    stats.deliveryFailures += 1;
    return false;
  }

  /** Stripe's form encoding as the client sends it: `created[gte]=1`, `types[0]=a`. */
  function listParams(query: URLSearchParams): { ok: true; p: ListParams } | { ok: false; param: string; message: string } {
    const p: ListParams = { gte: null, gt: null, lte: null, lt: null, deliverySuccess: null, types: null, limit: 10, startingAfter: null, endingBefore: null };
    const types: string[] = [];
    for (const [key, value] of query) {
      const created = /^created\[(gte|gt|lte|lt)\]$/.exec(key);
      if (created) {
        if (!/^\d{1,12}$/.test(value)) return { ok: false, param: key, message: `Invalid integer: ${value}` };
        p[created[1] as 'gte' | 'gt' | 'lte' | 'lt'] = Number(value);
      } else if (key === 'created') {
        if (!/^\d{1,12}$/.test(value)) return { ok: false, param: key, message: `Invalid integer: ${value}` };
        p.gte = p.lte = Number(value);
      } else if (key === 'delivery_success') {
        if (value !== 'true' && value !== 'false') return { ok: false, param: key, message: `Invalid boolean: ${value}` };
        p.deliverySuccess = value === 'true';
      } else if (key === 'type') types.push(value);
      else if (/^types\[\d+\]$/.test(key)) types.push(value);
      else if (key === 'limit') {
        const n = Number(value);
        if (!Number.isInteger(n) || n < 1 || n > 100) return { ok: false, param: key, message: 'This value must be between 1 and 100.' };
        p.limit = n;
      } else if (key === 'starting_after') p.startingAfter = value;
      else if (key === 'ending_before') p.endingBefore = value;
      else return { ok: false, param: key, message: `Received unknown parameter: ${key}` };
    }
    if (types.length > 20) return { ok: false, param: 'types', message: 'You may pass at most 20 types.' };
    if (types.length > 0) p.types = types;
    return { ok: true, p };
  }

  function routes(app: Hono): void {
    app.get('/v1/events', (c) => {
      stats.listCalls += 1;
      const auth = c.req.header('authorization') ?? '';
      if (auth !== `Bearer ${SANDBOX_STRIPE_API_KEY}`) {
        return c.json(stripeError('invalid_request_error', `Invalid API Key provided: ${auth.replace(/^Bearer /, '').slice(0, 12)}***`), 401);
      }
      const fault = faults[0];
      if (fault && fault.after > 0) fault.after -= 1;
      else if (fault) {
        fault.times -= 1;
        if (fault.times <= 0) faults.shift();
        stats.faultsAnswered += 1;
        if (fault.retryAfter !== null) c.header('Retry-After', String(fault.retryAfter));
        return c.json(
          fault.status === 429
            ? stripeError('invalid_request_error', 'Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.')
            : stripeError('api_error', 'An unknown error occurred'),
          fault.status as 429 | 500,
        );
      }
      const parsed = listParams(new URL(c.req.url).searchParams);
      if (!parsed.ok) return c.json(stripeError('invalid_request_error', parsed.message, parsed.param), 400);
      const { p } = parsed;
      // Newest first: created, then creation order.
      let list = [...events].sort((a, b) => b.event.created - a.event.created || b.seq - a.seq);
      list = list.filter(
        (s) =>
          (p.gte === null || s.event.created >= p.gte) &&
          (p.gt === null || s.event.created > p.gt) &&
          (p.lte === null || s.event.created <= p.lte) &&
          (p.lt === null || s.event.created < p.lt) &&
          (p.deliverySuccess === null || s.delivered === p.deliverySuccess) &&
          (p.types === null || p.types.some((t) => (t.endsWith('*') ? s.event.type.startsWith(t.slice(0, -1)) : s.event.type === t))),
      );
      if (p.startingAfter !== null) {
        const at = list.findIndex((s) => s.event.id === p.startingAfter);
        if (at < 0 && !events.some((s) => s.event.id === p.startingAfter)) {
          return c.json(stripeError('invalid_request_error', `No such event: '${p.startingAfter}'`, 'starting_after'), 400);
        }
        list = at < 0 ? [] : list.slice(at + 1);
      }
      const page = list.slice(0, p.limit);
      return c.json({ object: 'list', url: '/v1/events', has_more: list.length > p.limit, data: page.map((s) => JSON.parse(s.body) as unknown) });
    });

    app.post('/stripe/_endpoint', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { url?: unknown; secret?: unknown } | null;
      if (!body || typeof body.url !== 'string' || typeof body.secret !== 'string') return c.json({ error: 'url and secret are required' }, 400);
      endpoint = { url: body.url, secret: body.secret };
      return c.json({ ok: true });
    });

    app.post('/stripe/_events', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { events?: unknown; deliver?: unknown } | null;
      if (!body || !Array.isArray(body.events)) return c.json({ error: 'events: [event objects] is required' }, 400);
      const added: StoredEvent[] = [];
      for (const event of body.events as StoredEvent['event'][]) {
        if (typeof event?.id !== 'string' || typeof event.created !== 'number' || typeof event.type !== 'string')
          return c.json({ error: 'each event needs id, created and type' }, 400);
        seq += 1;
        const stored: StoredEvent = {
          event,
          body: JSON.stringify({ object: 'event', api_version: '2025-10-29.clover', pending_webhooks: 1, ...event }),
          delivered: false,
          attempts: 0,
          seq,
        };
        events.push(stored);
        added.push(stored);
      }
      let failed = 0;
      if (body.deliver !== false) for (const stored of added) if (!(await deliver(stored))) failed += 1;
      return c.json({ stored: added.length, delivered: added.length - failed, failed });
    });

    app.post('/stripe/_redeliver', async (c) => {
      const body = (await c.req.json().catch(() => ({}))) as { ids?: unknown };
      const ids = Array.isArray(body.ids) ? new Set(body.ids as string[]) : null;
      const targets = events.filter((s) => ids === null || ids.has(s.event.id));
      const results = await Promise.all(targets.map((s) => deliver(s)));
      return c.json({ attempted: targets.length, delivered: results.filter(Boolean).length });
    });

    app.post('/stripe/_faults', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { status?: unknown; times?: unknown; retryAfter?: unknown; after?: unknown } | null;
      if (!body || (body.status !== 429 && body.status !== 500) || !Number.isInteger(body.times)) return c.json({ error: 'status (429 or 500) and times are required' }, 400);
      faults.push({
        status: body.status,
        times: body.times as number,
        retryAfter: typeof body.retryAfter === 'number' ? body.retryAfter : null,
        after: Number.isInteger(body.after) ? (body.after as number) : 0,
      });
      return c.json({ ok: true });
    });

    app.delete('/stripe/_faults', (c) => {
      faults = [];
      return c.json({ ok: true });
    });

    app.get('/stripe/_stats', (c) =>
      c.json({ ...stats, events: events.length, undelivered: events.filter((s) => !s.delivered).length, faultsPending: faults.reduce((n, f) => n + f.times, 0) }),
    );
  }

  return {
    routes,
    reset() {
      events = [];
      endpoint = null;
      faults = [];
      Object.assign(stats, { listCalls: 0, faultsAnswered: 0, deliveries: 0, deliveryFailures: 0 });
    },
  };
}

interface ListParams {
  gte: number | null;
  gt: number | null;
  lte: number | null;
  lt: number | null;
  deliverySuccess: boolean | null;
  types: string[] | null;
  limit: number;
  startingAfter: string | null;
  endingBefore: string | null;
}
