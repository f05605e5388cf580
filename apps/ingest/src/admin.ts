/**
 * Admin, mounted under /admin only when credentials are configured, all of it behind one
 * authentication check (no admin route is reachable without it):
 *
 *   GET  /admin/queues/...                 Bull Board (jobs), read-only when ADMIN_READ_ONLY
 *   GET  /admin/events                     events view: stuck, dead letters, recent duplicates, recent
 *   GET  /admin/events/:id                 one event's timeline: attempts, steps, operator actions
 *   GET  /admin/api/events                 list (?state=&provider=&type=&older_than=&limit=)
 *   GET  /admin/api/events/:ref            one event (row id or provider/event_id)
 *   POST /admin/api/events/:id/redrive     {"reason": "..."}  same generation, same keys
 *   POST /admin/api/events/:id/replay      {"reason": "..."}  new generation, new keys
 *   POST /admin/api/redrive                {"state","provider","type","older_than","limit","dry_run","reason"}
 *
 * Auth: `Authorization: Bearer <ADMIN_TOKEN>` or HTTP basic with ADMIN_USERNAME/ADMIN_PASSWORD
 * (browsers prompt for it), compared in constant time. The actor recorded with a re-drive or
 * replay is the basic-auth user, or "token".
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import type { Context, Hono, Next } from 'hono';
import { html, raw } from 'hono/html';
import { createOperations, EVENT_STATES, signaturesEqual, type EventFilter, type EventState, type EventSummary } from '@oncehook/shared';
import type { IngestDeps } from './app';
import type { RecentDuplicate } from './recent-duplicates';

export interface AdminSettings {
  token?: string;
  username?: string;
  password?: string;
  readOnly: boolean;
}

type AdminEnv = { Variables: { actor: string } };

function authenticate(settings: AdminSettings) {
  return async (c: Context<AdminEnv>, next: Next) => {
    const header = c.req.header('authorization') ?? '';
    if (settings.token && header.startsWith('Bearer ') && signaturesEqual(settings.token, header.slice(7))) {
      c.set('actor', 'token');
      return next();
    }
    if (settings.username && settings.password && header.startsWith('Basic ')) {
      const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = decoded.slice(0, colon);
      const password = decoded.slice(colon + 1);
      // Both compared, always, so timing does not tell which one was wrong.
      const userOk = signaturesEqual(settings.username, user);
      const passwordOk = signaturesEqual(settings.password, password);
      if (colon > 0 && userOk && passwordOk) {
        c.set('actor', user);
        return next();
      }
    }
    c.header('WWW-Authenticate', 'Basic realm="oncehook admin", charset="UTF-8"');
    return c.json({ error: 'unauthorized', message: 'admin routes need Authorization: Bearer <ADMIN_TOKEN> or basic auth' }, 401);
  };
}

function filterFrom(c: Context): EventFilter | string {
  const state = c.req.query('state');
  if (state && !EVENT_STATES.includes(state as EventState)) return `state must be one of ${EVENT_STATES.join(', ')}`;
  const olderThan = c.req.query('older_than');
  const limit = c.req.query('limit');
  if (olderThan && !/^\d+$/.test(olderThan)) return 'older_than is a number of seconds';
  if (limit && !/^\d+$/.test(limit)) return 'limit is a number';
  return {
    state: state as EventState | undefined,
    provider: c.req.query('provider') || undefined,
    type: c.req.query('type') || undefined,
    olderThanSeconds: olderThan ? Number(olderThan) : undefined,
    limit: limit ? Math.min(Number(limit), 1000) : undefined,
  };
}

const PAGE_STYLE = `body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e3e6ee;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f4f6fa}.state-failed{color:#b3261e;font-weight:600}.state-processing{color:#9a6700}.state-done{color:#1a7f37}
code{font-size:12px}nav a{margin-right:16px}.muted{color:#667}`;

function page(title: string, body: ReturnType<typeof html>) {
  return html`<!doctype html><html><head><meta charset="utf-8"><title>${title} - Oncehook</title><style>${raw(PAGE_STYLE)}</style></head>
<body><nav><a href="/admin/events">Events</a><a href="/admin/queues">Jobs (Bull Board)</a></nav><h1>${title}</h1>${body}</body></html>`;
}

function eventTable(events: EventSummary[]) {
  if (events.length === 0) return html`<p class="muted">None.</p>`;
  return html`<table><tr><th>Row</th><th>Provider / event id</th><th>Type</th><th>State</th><th>Attempts</th><th>Gen</th><th>Updated</th><th>Last error</th></tr>
${events.map(
  (e) => html`<tr><td><a href="/admin/events/${e.id}">${e.id}</a></td><td><code>${e.provider}/${e.eventId}</code></td><td>${e.type}</td>
<td class="state-${e.state}">${e.state}</td><td>${e.attempts}</td><td>${e.generation}</td><td>${e.updatedAt.toISOString()}</td><td>${e.lastError ?? ''}</td></tr>`,
)}</table>`;
}

function duplicatesTable(items: RecentDuplicate[]) {
  if (items.length === 0) return html`<p class="muted">None since this process started.</p>`;
  return html`<table><tr><th>At</th><th>Provider / event id</th><th>Row</th><th>State when it arrived</th></tr>
${items.map((d) => html`<tr><td>${d.at.toISOString()}</td><td><code>${d.provider}/${d.eventId}</code></td><td>${d.rowId === null ? 'concurrent with the first' : html`<a href="/admin/events/${d.rowId}">${d.rowId}</a>`}</td><td>${d.state ?? '-'}</td></tr>`)}</table>`;
}

export function mountAdmin(app: Hono, deps: IngestDeps, settings: AdminSettings): boolean {
  if (!settings.token && !(settings.username && settings.password)) return false;
  const ops = createOperations({ pool: deps.pool, queue: deps.queue });
  const admin = app.basePath('/admin') as unknown as Hono<AdminEnv>;
  admin.use('*', authenticate(settings));

  const refuseIfReadOnly = async (c: Context<AdminEnv>, next: Next) => {
    if (settings.readOnly) return c.json({ error: 'read_only', message: 'admin is read-only (ADMIN_READ_ONLY=true)' }, 403);
    return next();
  };

  // Bull Board: the queue's jobs.
  const board = new HonoAdapter(serveStatic);
  createBullBoard({ queues: [new BullMQAdapter(deps.queue, { readOnlyMode: settings.readOnly })], serverAdapter: board, options: { uiConfig: { boardTitle: 'Oncehook jobs' } } });
  board.setBasePath('/admin/queues');
  admin.route('/queues', board.registerPlugin());

  // The admin API.
  admin.get('/api/events', async (c) => {
    const filter = filterFrom(c);
    if (typeof filter === 'string') return c.json({ error: 'bad_filter', message: filter }, 400);
    return c.json({ events: await ops.list(filter) });
  });
  admin.get('/api/events/:ref{.+}', async (c) => {
    const detail = await ops.show(c.req.param('ref'));
    return detail ? c.json(detail) : c.json({ error: 'not_found', message: `no event ${c.req.param('ref')}` }, 404);
  });
  const action = (kind: 'redrive' | 'replay') => async (c: Context<AdminEnv>) => {
    const id = c.req.param('id') ?? '';
    if (!/^\d+$/.test(id)) return c.json({ error: 'bad_id', message: 'the event is addressed by its numeric row id' }, 400);
    const body = (await c.req.json().catch(() => ({}))) as { reason?: unknown };
    if (typeof body.reason !== 'string' || body.reason.trim() === '') return c.json({ error: 'reason_required', message: `${kind} needs {"reason": "..."}; it is recorded with the event` }, 400);
    const result = kind === 'redrive' ? await ops.redrive(Number(id), c.get('actor'), body.reason) : await ops.replay(Number(id), c.get('actor'), body.reason);
    return c.json(result, result.ok ? 200 : 409);
  };
  admin.post('/api/events/:id/redrive', refuseIfReadOnly, action('redrive'));
  admin.post('/api/events/:id/replay', refuseIfReadOnly, action('replay'));
  admin.post('/api/redrive', async (c) => {
    const body = (await c.req.json().catch(() => ({}))) as Record<string, unknown>;
    const dryRun = body.dry_run !== false;
    if (!dryRun && settings.readOnly) return c.json({ error: 'read_only', message: 'admin is read-only (ADMIN_READ_ONLY=true); only dry runs are allowed' }, 403);
    if (!dryRun && (typeof body.reason !== 'string' || !body.reason)) return c.json({ error: 'reason_required', message: 'a bulk re-drive needs {"reason": "..."}' }, 400);
    const filter: EventFilter = {
      state: typeof body.state === 'string' ? (body.state as EventState) : undefined,
      provider: typeof body.provider === 'string' ? body.provider : undefined,
      type: typeof body.type === 'string' ? body.type : undefined,
      olderThanSeconds: typeof body.older_than === 'number' ? body.older_than : undefined,
      limit: typeof body.limit === 'number' ? body.limit : undefined,
    };
    return c.json(await ops.bulkRedrive(filter, { dryRun, actor: c.get('actor'), reason: typeof body.reason === 'string' ? body.reason : 'dry run' }));
  });

  // The events view.
  admin.get('/events', async (c) => {
    const [stuckProcessing, stuckReceived, failed, recent] = await Promise.all([
      deps.pool
        .query<{ id: number }>(`SELECT id FROM webhook_events WHERE state = 'processing' AND lease_until < now() ORDER BY lease_until LIMIT 50`)
        .then((r) => Promise.all(r.rows.map((row) => ops.show(row.id)))),
      ops.list({ state: 'received', olderThanSeconds: 60, limit: 50 }),
      ops.list({ state: 'failed', limit: 50 }),
      ops.list({ limit: 25 }),
    ]);
    const stuck: EventSummary[] = [...stuckProcessing.flatMap((d) => (d ? [{ ...d.event, lastError: d.event.lastError }] : [])), ...stuckReceived];
    return c.html(
      page(
        'Events',
        html`<p class="muted">Stuck = processing past its lease, or received for over a minute. Dead letters = failed: open one to re-drive or replay it (CLI: <code>npm run oncehook</code>).${settings.readOnly ? ' Read-only mode.' : ''}</p>
<h2>Stuck (${stuck.length})</h2>${eventTable(stuck)}
<h2>Dead letters (${failed.length})</h2>${eventTable(failed)}
<h2>Recent duplicates (seen by this ingest instance)</h2>${duplicatesTable(deps.recentDuplicates?.list(25) ?? [])}
<h2>Recent</h2>${eventTable(recent)}`,
      ),
    );
  });
  admin.get('/events/:id{[0-9]+}', async (c) => {
    const detail = await ops.show(Number(c.req.param('id')));
    if (!detail) return c.html(page('Not found', html`<p>No event ${c.req.param('id')}.</p>`), 404);
    const e = detail.event;
    return c.html(
      page(
        `Event ${e.id}`,
        html`<table>
<tr><th>Provider / event id</th><td><code>${e.provider}/${e.eventId}</code> (${e.kind})</td></tr>
<tr><th>Type</th><td>${e.type}</td></tr><tr><th>State</th><td class="state-${e.state}">${e.state}</td></tr>
<tr><th>Attempts / generation</th><td>${e.attempts} / ${e.generation}</td></tr>
<tr><th>Received</th><td>${e.receivedAt.toISOString()}</td></tr><tr><th>Signed at</th><td>${e.signedAt?.toISOString() ?? '-'}</td></tr>
<tr><th>Finished</th><td>${e.finishedAt?.toISOString() ?? '-'}</td></tr><tr><th>Last error</th><td>${e.lastError ?? '-'}</td></tr>
<tr><th>Note</th><td>${e.note ?? '-'}</td></tr><tr><th>Lease</th><td>${e.leaseUntil ? `until ${e.leaseUntil.toISOString()}` : '-'}</td></tr>
</table>
<h2>Timeline</h2><table><tr><th>When</th><th>What</th></tr>
<tr><td>${e.receivedAt.toISOString()}</td><td>received (claimed at the edge)</td></tr>
${detail.steps.map((s) => html`<tr><td>${s.completedAt.toISOString()}</td><td>step <b>${s.name}</b> (generation ${s.generation}) committed: <code>${JSON.stringify(s.result)}</code></td></tr>`)}
${detail.operatorActions.map((a) => html`<tr><td>${a.createdAt.toISOString()}</td><td>${a.mode} by ${a.actor} from ${a.fromState} (generation ${a.generation}): ${a.reason}</td></tr>`)}
</table>
<h2>Payload</h2><pre><code>${JSON.stringify(e.payload, null, 2)}</code></pre>`,
      ),
    );
  });
  return true;
}
