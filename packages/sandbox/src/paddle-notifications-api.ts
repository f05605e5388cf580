/**
 * Paddle Billing's notifications API and its webhook deliveries, as the sandbox plays them (what
 * `oncehook backfill paddle` reads):
 *
 *   GET  /notifications             Bearer key; status (comma-separated: delivered, failed,
 *                                   needs_retry, not_attempted), from / to (RFC 3339, on
 *                                   occurred_at), per_page (max 200), order_by id[DESC], after;
 *                                   meta.pagination {next, has_more}. 401 for another key, 429
 *                                   with Retry-After when a fault says so
 *   POST /paddle/_endpoint          {url, secret}: the notification setting's destination,
 *                                   signed as Paddle signs (Paddle-Signature: ts=..;h1=HMAC of
 *                                   `ts:body`)
 *   POST /paddle/_events            {events: [{event_id, event_type, occurred_at, data}]}: a
 *                                   notification each, delivered once (`delivered` or `failed`)
 *   POST /paddle/_faults            {status: 429, times, retryAfter?}; DELETE clears
 */
import { createHmac } from 'node:crypto';
import type { Hono } from 'hono';

export const SANDBOX_PADDLE_API_KEY = 'pdl_sdbx_apikey_oncehooksandbox0000000001';

interface Notification {
  id: string;
  type: string;
  status: 'delivered' | 'failed' | 'needs_retry' | 'not_attempted';
  payload: Record<string, unknown>;
  occurred_at: string;
  delivered_at: string | null;
  replayed_at: null;
  origin: 'event';
  last_attempt_at: string | null;
  retry_at: null;
  times_attempted: number;
  notification_setting_id: string;
}

export function createPaddleNotificationsApi() {
  let notifications: Notification[] = [];
  let endpoint: { url: string; secret: string } | null = null;
  let faults: { status: number; times: number; retryAfter: number | null }[] = [];
  let seq = 0;
  const stats = { listCalls: 0, faultsAnswered: 0 };

  async function deliver(notification: Notification): Promise<void> {
    notification.times_attempted += 1;
    notification.last_attempt_at = new Date().toISOString();
    notification.status = 'failed';
    if (!endpoint) return;
    const body = JSON.stringify(notification.payload);
    const ts = Math.floor(Date.now() / 1000);
    const h1 = createHmac('sha256', endpoint.secret).update(`${ts}:${body}`).digest('hex');
    try {
      const response = await fetch(endpoint.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'paddle-signature': `ts=${ts};h1=${h1}` },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.ok) {
        notification.status = 'delivered';
        notification.delivered_at = new Date().toISOString();
      }
    } catch {
      // Not delivered: Paddle marks it failed once its retries are exhausted.
    }
  }

  function routes(app: Hono): void {
    app.get('/notifications', (c) => {
      stats.listCalls += 1;
      if (c.req.header('authorization') !== `Bearer ${SANDBOX_PADDLE_API_KEY}`) {
        return c.json({ error: { type: 'request_error', code: 'authentication_malformed', detail: 'Authentication header included, but incorrectly formatted' } }, 403);
      }
      const fault = faults[0];
      if (fault) {
        fault.times -= 1;
        if (fault.times <= 0) faults.shift();
        stats.faultsAnswered += 1;
        if (fault.retryAfter !== null) c.header('Retry-After', String(fault.retryAfter));
        return c.json({ error: { type: 'request_error', code: 'too_many_requests', detail: 'Too many requests' } }, 429);
      }
      const url = new URL(c.req.url);
      const q = url.searchParams;
      const perPage = Math.min(Number(q.get('per_page') ?? 50), 200);
      const statuses = q.get('status')?.split(',') ?? null;
      const from = q.get('from') ? Date.parse(q.get('from')!) : null;
      const to = q.get('to') ? Date.parse(q.get('to')!) : null;
      const after = q.get('after');
      let list = [...notifications].sort((a, b) => (a.id < b.id ? 1 : -1));
      list = list.filter(
        (n) => (statuses === null || statuses.includes(n.status)) && (from === null || Date.parse(n.occurred_at) >= from) && (to === null || Date.parse(n.occurred_at) <= to),
      );
      if (after) list = list.filter((n) => n.id < after);
      const page = list.slice(0, perPage);
      const hasMore = list.length > perPage;
      const next = new URL(url);
      if (page.length > 0) next.searchParams.set('after', page[page.length - 1]!.id);
      return c.json({ data: page, meta: { request_id: `req_${seq}`, pagination: { per_page: perPage, next: next.toString(), has_more: hasMore, estimated_total: list.length } } });
    });
    app.post('/paddle/_endpoint', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { url?: unknown; secret?: unknown } | null;
      if (!body || typeof body.url !== 'string' || typeof body.secret !== 'string') return c.json({ error: 'url and secret are required' }, 400);
      endpoint = { url: body.url, secret: body.secret };
      return c.json({ ok: true });
    });
    app.post('/paddle/_events', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { events?: Record<string, unknown>[] } | null;
      if (!body || !Array.isArray(body.events)) return c.json({ error: 'events: [{event_id, event_type, occurred_at, data}] is required' }, 400);
      let delivered = 0;
      for (const event of body.events) {
        seq += 1;
        const id = `ntf_${String(seq).padStart(26, '0')}`;
        const notification: Notification = {
          id,
          type: String(event.event_type),
          status: 'not_attempted',
          payload: { ...event, notification_id: id },
          occurred_at: String(event.occurred_at),
          delivered_at: null,
          replayed_at: null,
          origin: 'event',
          last_attempt_at: null,
          retry_at: null,
          times_attempted: 0,
          notification_setting_id: 'ntfset_sandbox',
        };
        notifications.push(notification);
        await deliver(notification);
        if (notification.status === 'delivered') delivered += 1;
      }
      return c.json({ stored: body.events.length, delivered, failed: body.events.length - delivered });
    });
    app.post('/paddle/_faults', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { status?: number; times?: number; retryAfter?: number } | null;
      if (body?.status !== 429 || !Number.isInteger(body.times)) return c.json({ error: 'status 429 and times are required' }, 400);
      faults.push({ status: 429, times: body.times!, retryAfter: typeof body.retryAfter === 'number' ? body.retryAfter : null });
      return c.json({ ok: true });
    });
    app.delete('/paddle/_faults', (c) => {
      faults = [];
      return c.json({ ok: true });
    });
    app.get('/paddle/_stats', (c) => c.json({ ...stats, notifications: notifications.length }));
  }

  return {
    routes,
    reset() {
      notifications = [];
      endpoint = null;
      faults = [];
      Object.assign(stats, { listCalls: 0, faultsAnswered: 0 });
    },
  };
}
