/**
 * GitHub's webhook deliveries API and the deliveries themselves, as the sandbox plays them (what
 * `oncehook backfill github` reads, driven in the tests by `@octokit/core`):
 *
 *   GET  /repos/:owner/:repo/hooks/:hook_id/deliveries        `token` or Bearer auth; per_page
 *                                   (1-100, default 30), cursor; newest first; a Link header
 *                                   with rel="next" while more remain. 401 for another token,
 *                                   404 for another hook, 429 / 403 (rate limit) / 500 when a
 *                                   fault says so
 *   GET  /repos/:owner/:repo/hooks/:hook_id/deliveries/:id    one delivery with its request
 *                                   (headers, payload) and response
 *   POST /github/_endpoint          {url, secret}: where the hook delivers (owner/repo/hook:
 *                                   octo/shop/12345), signed as GitHub signs (X-Hub-Signature-256)
 *   POST /github/_events            {events: [{event, payload}], deliver?: true}: one delivery
 *                                   each (a new GUID), attempted once; status_code 0 when nothing
 *                                   answered
 *   POST /github/_redeliver         {guids?}: a redelivery (same GUID, `redelivery: true`) of each
 *   POST /github/_faults            {status: 429|403|500, times, retryAfter?, after?}; DELETE clears
 *   GET  /github/_stats             list and detail calls, faults answered
 */
import { createHmac, randomUUID } from 'node:crypto';
import type { Context, Hono } from 'hono';

export const SANDBOX_GITHUB_TOKEN = 'ghp_oncehooksandbox000000000000000000001';
export const SANDBOX_GITHUB_HOOK = { owner: 'octo', repo: 'shop', hookId: 12345 } as const;

interface Delivery {
  id: number;
  guid: string;
  delivered_at: string;
  redelivery: boolean;
  duration: number;
  status: string;
  status_code: number;
  event: string;
  action: string | null;
  installation_id: null;
  repository_id: number;
  request: { headers: Record<string, string>; payload: Record<string, unknown> };
  response: { headers: Record<string, string>; payload: string | null };
}

export function createGitHubDeliveriesApi() {
  let deliveries: Delivery[] = [];
  let endpoint: { url: string; secret: string } | null = null;
  let faults: { status: number; times: number; retryAfter: number | null; after: number }[] = [];
  const stats = { listCalls: 0, detailCalls: 0, faultsAnswered: 0 };
  let nextId = 1;

  async function attempt(guid: string, event: string, payload: Record<string, unknown>, redelivery: boolean): Promise<Delivery> {
    const body = JSON.stringify(payload);
    const headers: Record<string, string> = {
      Accept: '*/*',
      'content-type': 'application/json',
      'User-Agent': 'GitHub-Hookshot/sandbox',
      'X-GitHub-Delivery': guid,
      'X-GitHub-Event': event,
      'X-GitHub-Hook-ID': String(SANDBOX_GITHUB_HOOK.hookId),
      'X-GitHub-Hook-Installation-Target-ID': '1',
      'X-GitHub-Hook-Installation-Target-Type': 'repository',
    };
    let statusCode = 0;
    let answer: string | null = null;
    if (endpoint) {
      headers['X-Hub-Signature-256'] = `sha256=${createHmac('sha256', endpoint.secret).update(body).digest('hex')}`;
      try {
        const response = await fetch(endpoint.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
        statusCode = response.status;
        answer = await response.text().catch(() => null);
      } catch {
        statusCode = 0; // nothing answered: GitHub shows "failed to connect"
      }
    }
    const delivery: Delivery = {
      id: nextId++,
      guid,
      delivered_at: new Date().toISOString(),
      redelivery,
      duration: 0.01,
      status: statusCode >= 200 && statusCode < 300 ? 'OK' : statusCode === 0 ? 'failed to connect to host' : `Invalid HTTP Response: ${statusCode}`,
      status_code: statusCode,
      event,
      action: typeof payload.action === 'string' ? payload.action : null,
      installation_id: null,
      repository_id: 1,
      request: { headers, payload },
      response: { headers: {}, payload: answer },
    };
    deliveries.push(delivery);
    return delivery;
  }

  /** The auth and the hook of an API call, or the answer refusing it; a fault when one is due. */
  function guard(c: Context): Response | null {
    const auth = c.req.header('authorization') ?? '';
    if (auth !== `token ${SANDBOX_GITHUB_TOKEN}` && auth !== `Bearer ${SANDBOX_GITHUB_TOKEN}`) return c.json({ message: 'Bad credentials', status: '401' }, 401);
    const { owner, repo, hook_id } = c.req.param() as Record<string, string>;
    if (owner !== SANDBOX_GITHUB_HOOK.owner || repo !== SANDBOX_GITHUB_HOOK.repo || hook_id !== String(SANDBOX_GITHUB_HOOK.hookId))
      return c.json({ message: 'Not Found', status: '404' }, 404);
    const fault = faults[0];
    if (fault && fault.after > 0) fault.after -= 1;
    else if (fault) {
      fault.times -= 1;
      if (fault.times <= 0) faults.shift();
      stats.faultsAnswered += 1;
      if (fault.retryAfter !== null) c.header('Retry-After', String(fault.retryAfter));
      if (fault.status === 403) {
        c.header('x-ratelimit-remaining', '0');
        c.header('x-ratelimit-reset', String(Math.floor(Date.now() / 1000) + 1));
        return c.json({ message: 'API rate limit exceeded', status: '403' }, 403);
      }
      return c.json({ message: fault.status === 429 ? 'You have exceeded a secondary rate limit' : 'Server Error', status: String(fault.status) }, fault.status as 429 | 500);
    }
    return null;
  }

  function routes(app: Hono): void {
    const base = '/repos/:owner/:repo/hooks/:hook_id/deliveries';
    app.get(base, (c) => {
      stats.listCalls += 1;
      const refused = guard(c);
      if (refused) return refused;
      const url = new URL(c.req.url);
      const perPage = url.searchParams.has('per_page') ? Number(url.searchParams.get('per_page')) : 30;
      if (!Number.isInteger(perPage) || perPage < 1 || perPage > 100) return c.json({ message: 'per_page must be between 1 and 100' }, 422);
      const cursor = url.searchParams.get('cursor');
      const start = cursor === null ? 0 : Number(Buffer.from(cursor, 'base64url').toString());
      if (!Number.isInteger(start) || start < 0) return c.json({ message: 'Invalid cursor' }, 422);
      const newestFirst = [...deliveries].reverse();
      const page = newestFirst.slice(start, start + perPage);
      if (start + perPage < newestFirst.length) {
        const next = new URL(url);
        next.searchParams.set('per_page', String(perPage));
        next.searchParams.set('cursor', Buffer.from(String(start + perPage)).toString('base64url'));
        c.header('Link', `<${next.toString()}>; rel="next"`);
      }
      return c.json(page.map(({ request: _r, response: _s, ...summary }) => summary));
    });
    app.get(`${base}/:delivery_id`, (c) => {
      stats.detailCalls += 1;
      const refused = guard(c);
      if (refused) return refused;
      const delivery = deliveries.find((d) => String(d.id) === c.req.param('delivery_id'));
      return delivery ? c.json(delivery) : c.json({ message: 'Not Found' }, 404);
    });

    app.post('/github/_endpoint', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { url?: unknown; secret?: unknown } | null;
      if (!body || typeof body.url !== 'string' || typeof body.secret !== 'string') return c.json({ error: 'url and secret are required' }, 400);
      endpoint = { url: body.url, secret: body.secret };
      return c.json({ ok: true });
    });
    app.post('/github/_events', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { events?: { event: string; payload: Record<string, unknown> }[] } | null;
      if (!body || !Array.isArray(body.events)) return c.json({ error: 'events: [{event, payload}] is required' }, 400);
      let ok = 0;
      const guids: string[] = [];
      for (const e of body.events) {
        const delivery = await attempt(randomUUID(), e.event, e.payload, false);
        guids.push(delivery.guid);
        if (delivery.status_code >= 200 && delivery.status_code < 300) ok += 1;
      }
      return c.json({ stored: body.events.length, delivered: ok, failed: body.events.length - ok, guids });
    });
    app.post('/github/_redeliver', async (c) => {
      const body = (await c.req.json().catch(() => ({}))) as { guids?: string[] };
      const firsts = new Map<string, Delivery>();
      for (const d of deliveries) if (!firsts.has(d.guid) && (!body.guids || body.guids.includes(d.guid))) firsts.set(d.guid, d);
      let ok = 0;
      for (const d of firsts.values()) {
        const again = await attempt(d.guid, d.event, d.request.payload, true);
        if (again.status_code >= 200 && again.status_code < 300) ok += 1;
      }
      return c.json({ attempted: firsts.size, delivered: ok });
    });
    app.post('/github/_faults', async (c) => {
      const body = (await c.req.json().catch(() => null)) as { status?: number; times?: number; retryAfter?: number; after?: number } | null;
      if (!body || ![429, 403, 500].includes(body.status ?? 0) || !Number.isInteger(body.times)) return c.json({ error: 'status (429, 403 or 500) and times are required' }, 400);
      faults.push({ status: body.status!, times: body.times!, retryAfter: typeof body.retryAfter === 'number' ? body.retryAfter : null, after: body.after ?? 0 });
      return c.json({ ok: true });
    });
    app.delete('/github/_faults', (c) => {
      faults = [];
      return c.json({ ok: true });
    });
    app.get('/github/_stats', (c) => c.json({ ...stats, deliveries: deliveries.length }));
  }

  return {
    routes,
    reset() {
      deliveries = [];
      endpoint = null;
      faults = [];
      Object.assign(stats, { listCalls: 0, detailCalls: 0, faultsAnswered: 0 });
    },
  };
}
