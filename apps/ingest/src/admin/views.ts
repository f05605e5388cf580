/**
 * The admin's HTML pages (under /admin, behind adminAuth):
 *
 *   GET /admin/events        stuck runs, dead letters, recent duplicates, recent events
 *   GET /admin/events/:id    one event: its handler runs, steps and operator actions in time order
 */
import type { EventDetail, EventSummary, Operations, Queries } from '@oncehook/shared';
import type { Pool } from '@oncehook/shared';
import type { Hono } from 'hono';
import { html } from 'hono/html';
import type { RecentDuplicate, RecentDuplicates } from '../recent-duplicates';
import type { AdminEnv, AdminSettings } from './auth';

const PAGE_STYLE = `body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e3e6ee;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f4f6fa}.state-failed{color:#b3261e;font-weight:600}.state-processing,.state-received{color:#9a6700}.state-done{color:#1a7f37}
code{font-size:12px}nav a{margin-right:16px}.muted{color:#667}`;

export function page(title: string, body: ReturnType<typeof html>) {
  return html`<!doctype html><html><head><meta charset="utf-8"><title>${title} - Oncehook</title><link rel="stylesheet" href="/admin/assets/admin.css"></head>
<body><nav><a href="/admin/events">Events</a><a href="/admin/queues">Jobs (Bull Board)</a></nav><h1>${title}</h1>${body}</body></html>`;
}

function runsCell(e: EventSummary) {
  if (e.runs.length === 0) return html`<span class="muted">${e.note ?? '-'}</span>`;
  return html`${e.runs.map((r) => html`<div><span class="state-${r.state}">${r.handler}: ${r.state}</span>${r.attempts > 1 ? ` (${r.attempts} attempts)` : ''}${r.generation > 0 ? ` gen ${r.generation}` : ''}${r.lastError && r.state !== 'done' ? html` <span class="muted">${r.lastError}</span>` : ''}</div>`)}`;
}

function eventTable(events: EventSummary[]) {
  if (events.length === 0) return html`<p class="muted">None.</p>`;
  return html`<table><tr><th>Row</th><th>Provider / event id</th><th>Type</th><th>State</th><th>Handler runs</th><th>Updated</th></tr>
${events.map(
  (e) => html`<tr><td><a href="/admin/events/${e.id}">${e.id}</a></td><td><code>${e.provider}/${e.eventId}</code></td><td>${e.type}</td>
<td class="state-${e.state}">${e.state}</td><td>${runsCell(e)}</td><td>${e.updatedAt.toISOString()}</td></tr>`,
)}</table>`;
}

function duplicatesTable(items: RecentDuplicate[]) {
  if (items.length === 0) return html`<p class="muted">None since this process started.</p>`;
  return html`<table><tr><th>At</th><th>Provider / event id</th><th>Row</th><th>State when it arrived</th></tr>
${items.map((d) => html`<tr><td>${d.at.toISOString()}</td><td><code>${d.provider}/${d.eventId}</code></td><td>${d.rowId === null ? 'concurrent with the first' : html`<a href="/admin/events/${d.rowId}">${d.rowId}</a>`}</td><td>${d.state ?? '-'}</td></tr>`)}</table>`;
}

function timeline(detail: EventDetail) {
  const e = detail.event;
  const entries: { at: Date; what: ReturnType<typeof html> }[] = [{ at: e.receivedAt, what: html`received (claimed at the edge)` }];
  for (const s of detail.steps) {
    entries.push({
      at: s.completedAt,
      what: html`<b>${s.handler}</b> step <b>${s.name}</b> (${s.kind ?? 'step'}, generation ${s.generation}) ${s.reusedFrom === null ? 'committed' : html`reused from generation ${s.reusedFrom}`}${s.idempotencyKey ? html`, key <code>${s.idempotencyKey}</code>` : ''}: <code>${JSON.stringify(s.result)}</code>`,
    });
  }
  for (const a of detail.operatorActions) {
    entries.push({ at: a.createdAt, what: html`${a.mode} of <b>${a.handler ?? 'the event'}</b> by ${a.actor} from ${a.fromState} (generation ${a.generation}): ${a.reason}` });
  }
  entries.sort((x, y) => x.at.getTime() - y.at.getTime());
  return html`<table><tr><th>When</th><th>What</th></tr>${entries.map((x) => html`<tr><td>${x.at.toISOString()}</td><td>${x.what}</td></tr>`)}</table>`;
}

export function mountAdminViews(admin: Hono<AdminEnv>, deps: { pool: Pool; queries: Queries; ops: Operations; recentDuplicates: RecentDuplicates }, settings: AdminSettings): void {
  const { pool, queries, ops } = deps;
  // Served, not inline: the pages' Content-Security-Policy allows styles and scripts from the admin only.
  admin.get('/assets/admin.css', (c) => c.body(PAGE_STYLE, 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'max-age=3600' }));
  admin.get('/events', async (c) => {
    const [stuck, failed, recent] = await Promise.all([queries.listStuckRuns(pool, 60_000, 50), ops.list({ state: 'failed', limit: 50 }), ops.list({ limit: 25 })]);
    return c.html(
      page(
        'Events',
        html`<p class="muted">Stuck = a handler run processing past its lease, or received for over a minute. Dead letters = a handler run failed: re-drive or replay it with the CLI (<code>npm run oncehook</code>) or the admin API.${settings.readOnly ? ' Read-only mode.' : ''}</p>
<h2>Stuck (${stuck.length})</h2>${eventTable(stuck)}
<h2>Dead letters (${failed.length})</h2>${eventTable(failed)}
<h2>Recent duplicates (seen by this ingest instance)</h2>${duplicatesTable(deps.recentDuplicates.list(25))}
<h2>Recent</h2>${eventTable(recent)}`,
      ),
    );
  });

  admin.get('/events/:id{[0-9]{1,15}}', async (c) => {
    const detail = await ops.show(Number(c.req.param('id')));
    if (!detail) return c.html(page('Not found', html`<p>No event ${c.req.param('id')}.</p>`), 404);
    const e = detail.event;
    return c.html(
      page(
        `Event ${e.id}`,
        html`<table>
<tr><th>Provider / event id</th><td><code>${e.provider}/${e.eventId}</code> (${e.kind})</td></tr>
<tr><th>Type</th><td>${e.type}</td></tr><tr><th>State</th><td class="state-${e.state}">${e.state}</td></tr>
<tr><th>Received</th><td>${e.receivedAt.toISOString()}</td></tr><tr><th>Signed at</th><td>${e.signedAt?.toISOString() ?? '-'}</td></tr>
<tr><th>Finished</th><td>${e.finishedAt?.toISOString() ?? '-'}</td></tr><tr><th>Note</th><td>${e.note ?? '-'}</td></tr>
</table>
<h2>Handler runs</h2>${
          detail.runs.length === 0
            ? html`<p class="muted">None.</p>`
            : html`<table><tr><th>Handler</th><th>State</th><th>Attempts</th><th>Generation</th><th>Lease</th><th>Last error</th></tr>
${detail.runs.map((r) => html`<tr><td>${r.handler}</td><td class="state-${r.state}">${r.state}</td><td>${r.attempts}</td><td>${r.generation}</td><td>${r.leaseUntil ? `until ${r.leaseUntil.toISOString()}` : '-'}</td><td>${r.lastError ?? '-'}</td></tr>`)}</table>`
        }
<h2>Timeline</h2>${timeline(detail)}
<h2>Payload</h2><pre><code>${JSON.stringify(e.payload, null, 2)}</code></pre>`,
      ),
    );
  });
}
