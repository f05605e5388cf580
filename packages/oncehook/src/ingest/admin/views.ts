/**
 * The admin's HTML pages (under /admin, behind adminAuth):
 *
 *   GET /admin, /admin/      -> /admin/events
 *   GET /admin/events        the search (event-search.ts; the URL is the search, shareable), its
 *                            results a page at a time, re-drive all matching (after a preview);
 *                            without a search also the stuck runs and the recent duplicates
 *   GET /admin/failures      failure groups: failed and retrying runs by handler and error
 *                            shape, each with its events, re-drive all, resolve, pause
 *   GET /admin/pauses        what is paused (a resume button each, with a reason) and a form to pause
 *   GET /admin/destinations  the destinations events are forwarded to, and how each is doing
 *   GET /admin/events/:id    one event: its actions (re-drive, replay with a preview first), its
 *                            handler runs, and its timeline: deliveries, attempts and their
 *                            verdicts, steps and operator actions, in time order
 *
 * Pages carry no inline script or style (the CSP forbids it): the stylesheet and the actions'
 * script are served from /admin/assets. The actions post JSON to the admin API (api.ts).
 */
import { readFileSync } from 'node:fs';
import {
  destinationStates,
  EVENT_STATES,
  type EventDetail,
  type EventFilter,
  type EventSummary,
  type FailureGroup,
  type Operations,
  type Queries,
  SearchTooSlowError,
} from '@oncehook/core';
import type { RunRow } from '@oncehook/core';
import type { Pool } from '@oncehook/shared';
import type { Context, Hono } from 'hono';
import { html } from 'hono/html';
import { parseEventSearch, type SearchInput, searchQuery } from '../../event-search.js';
import type { RecentDuplicate, RecentDuplicates } from '../recent-duplicates.js';
import type { AdminEnv, AdminSettings } from './auth.js';
import { type AdminBudget, inSearchSlot, type SearchSlots } from './budget.js';

/** The actions' script (assets/event-actions.js; in dist, copied next to the bundle by the build). */
const EVENT_ACTIONS_JS = readFileSync(new URL('./assets/event-actions.js', import.meta.url), 'utf8');

const PAGE_STYLE = `body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #e3e6ee;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f4f6fa}.state-failed{color:#b3261e;font-weight:600}.state-processing,.state-received{color:#9a6700}.state-done{color:#1a7f37}
code{font-size:12px}nav a{margin-right:16px}.muted{color:#667}
form.action{border:1px solid #e3e6ee;border-radius:6px;padding:12px;margin:12px 0;max-width:900px}form.action h3{font-size:14px;margin:0 0 8px}
form.action label{display:inline-block;margin:2px 12px 2px 0}form.action input[name=reason]{width:420px;padding:4px}
form.action button{margin:8px 8px 0 0;padding:4px 12px}.result{white-space:pre-wrap;margin:8px 0 0;font:12px monospace}
table.timeline td:first-child{white-space:nowrap}form.search{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:end;margin:8px 0 16px}
form.search label{display:flex;flex-direction:column;font-size:12px;color:#445}form.search input,form.search select{padding:3px;font-size:13px}
form.search input[name=payload]{width:260px}figure.chart{margin:12px 0 20px;max-width:960px}figure.chart figcaption{font-size:13px;margin-bottom:4px}.legend{margin-left:10px;color:#445;font-size:12px}.refused{color:#b3261e}.pager{margin:12px 0}.result.ok{color:#1a7f37}.result.refused{color:#b3261e}.kind{display:inline-block;min-width:86px;color:#667}`;

export function page(title: string, body: ReturnType<typeof html>, scripts: string[] = []) {
  return html`<!doctype html><html><head><meta charset="utf-8"><title>${title} - Oncehook</title><link rel="stylesheet" href="/admin/assets/admin.css"></head>
<body><nav><a href="/admin/events">Events</a><a href="/admin/failures">Failures</a><a href="/admin/activity">Activity</a><a href="/admin/handlers">Handlers</a><a href="/admin/pauses">Pauses</a><a href="/admin/destinations">Destinations</a><a href="/admin/queues">Jobs</a></nav><h1>${title}</h1>${body}${scripts.map((src) => html`<script src="${src}" defer></script>`)}</body></html>`;
}

function runsCell(e: EventSummary) {
  if (e.runs.length === 0) return html`<span class="muted">${e.note ?? '-'}</span>`;
  return html`${e.runs.map((r) => html`<div><span class="state-${r.state}">${r.handler}: ${r.state}${r.waiting ? ` (waiting: ${r.waiting})` : ''}</span>${r.attempts > 1 ? ` (${r.attempts} attempts)` : ''}${r.generation > 0 ? ` gen ${r.generation}` : ''}${r.lastError && r.state !== 'done' ? html` <span class="muted">${r.lastError}</span>` : ''}</div>`)}`;
}

function eventTable(events: EventSummary[]) {
  if (events.length === 0) return html`<p class="muted">None.</p>`;
  return html`<table><tr><th>Row</th><th>Provider / event id</th><th>Type</th><th>State</th><th>Handler runs</th><th>Deliveries</th><th>Updated</th></tr>
${events.map(
  (e) => html`<tr><td><a href="/admin/events/${e.id}">${e.id}</a></td><td><code>${e.source}/${e.eventId}</code></td><td>${e.type}</td>
<td class="state-${e.state}">${e.state}</td><td>${runsCell(e)}</td><td>${e.deliveries}</td><td>${e.updatedAt.toISOString()}</td></tr>`,
)}</table>`;
}

const STATE_OPTIONS = ['', ...EVENT_STATES];
const WAITING_OPTIONS = ['', 'paused', 'concurrency', 'rate-limit'];

function select(name: string, options: string[], value: string | undefined) {
  return html`<select name="${name}">${options.map((o) => html`<option value="${o}"${o === (value ?? '') ? ' selected' : ''}>${o === '' ? 'any' : o}</option>`)}</select>`;
}

/** The search form: a GET of this page, so the URL is the search (bookmark it, share it). */
function searchForm(input: SearchInput) {
  const box = (name: keyof SearchInput, label: string, placeholder: string) =>
    html`<label>${label}<input name="${name}" value="${input[name] ?? ''}" placeholder="${placeholder}"></label>`;
  return html`<form class="search" method="get" action="/admin/events">
<label>State${select('state', STATE_OPTIONS, input.state)}</label><label>Waiting${select('waiting', WAITING_OPTIONS, input.waiting)}</label>
${box('source', 'Source', 'stripe')}${box('type', 'Type', 'invoice.paid')}${box('handler', 'Handler / destination', 'shop.payments')}${box('event_id', 'Event id', 'evt_...')}
${box('since', 'Since', '2h or 2026-12-02T02:51Z')}${box('until', 'Until', '')}${box('payload', 'Payload', 'data.object.customer=cus_42')}
${input.group ? html`<input type="hidden" name="group" value="${input.group}">` : ''}${box('limit', 'Per page', '50')}
<button type="submit">Search</button> <a href="/admin/events">Clear</a></form>
${input.group ? html`<p class="muted">Only the events of failure group <code>${input.group}</code> (<a href="/admin/failures">failures</a>).</p>` : ''}`;
}

/** Re-drive every event the search matches: a preview (how many, which) first, then the action. */
function bulkRedriveForm(input: SearchInput) {
  const { before: _page, limit: _perPage, ...search } = input;
  return html`<form class="action bulk" data-url="/admin/api/redrive" data-search="${JSON.stringify(search)}">
<h3>Re-drive all matching events${input.state ? '' : ' (their failed runs: state failed unless chosen)'}</h3>
<p class="muted">Each as a single re-drive: same generation, committed steps skipped, the same idempotency keys. Up to 10,000 events; preview first.</p>
<label>Reason <input name="reason" placeholder="what was fixed"></label><br>
<button type="submit" value="preview">Preview (dry run)</button><button type="submit" value="redrive" disabled>Re-drive all</button><div class="result"></div></form>`;
}

function failureGroup(g: FailureGroup, readOnly: boolean) {
  const events = `/admin/events?${searchQuery({ group: g.id, handler: g.handler })}`;
  return html`<section class="group" data-group="${g.id}"><h2><code>${g.handler}</code>: ${g.failed + g.retrying} run(s) <span class="muted">(${g.failed} failed, ${g.retrying} retrying)</span>${g.resolved ? ' - resolved' : ''}</h2>
<p><code class="shape">${g.shape}</code></p>
<p class="muted">First seen ${g.firstSeen.toISOString()}, last ${g.lastSeen.toISOString()}. Latest: <a href="/admin/events/${g.sampleEvent}">event ${g.sampleEvent}</a> <code>${g.sampleError}</code>
${g.resolvedAt ? html`<br>Resolved ${g.resolvedAt.toISOString()} by ${g.resolvedBy}: ${g.resolution}${g.resolved ? '' : ' (failed again since)'}` : ''}</p>
<p><a href="${events}">Its events</a> (group <code>${g.id}</code>)</p>
${
  readOnly
    ? ''
    : html`<form class="action bulk" data-url="/admin/api/redrive" data-search="${JSON.stringify({ group: g.id, handler: g.handler })}"><h3>Re-drive the group's failed runs</h3>
<label>Reason <input name="reason" placeholder="what was fixed"></label><br><button type="submit" value="preview">Preview (dry run)</button><button type="submit" value="redrive" disabled>Re-drive all</button><div class="result"></div></form>
<form class="action resolve" data-url="/admin/api/failure-groups/${g.id}/resolve"><h3>Mark resolved</h3><label>Reason <input name="reason" placeholder="fixed in 1.4.2"></label><button type="submit">Resolve</button><div class="result"></div></form>
<form class="action pause-action" data-url="/admin/api/pauses" data-scope="handler" data-name="${g.handler}"><h3>Pause ${g.handler}</h3><label>Reason <input name="reason" placeholder="the API is down"></label><button type="submit">Pause</button><div class="result"></div></form>`
}</section>`;
}

function duplicatesTable(items: RecentDuplicate[]) {
  if (items.length === 0) return html`<p class="muted">None since this process started.</p>`;
  return html`<table><tr><th>At</th><th>Provider / event id</th><th>Row</th><th>State when it arrived</th></tr>
${items.map((d) => html`<tr><td>${d.at.toISOString()}</td><td><code>${d.source}/${d.eventId}</code></td><td>${d.rowId === null ? 'concurrent with the first' : html`<a href="/admin/events/${d.rowId}">${d.rowId}</a>`}</td><td>${d.state ?? '-'}</td></tr>`)}</table>`;
}

type Entry = { at: Date; order: number; kind: string; what: ReturnType<typeof html> | string };

/**
 * Everything that happened to the event, oldest first. Ties keep a causal order: a delivery,
 * then an attempt's start, its steps, its verdict; an operator action before what it caused.
 * Steps a replay reused are listed with the replay, not at the time they first ran.
 */
export function timelineEntries(detail: EventDetail): Entry[] {
  const entries: Entry[] = [];
  if (detail.event.origin === 'backfill') {
    // Never delivered: fetched from the provider's API (a later delivery is then a duplicate).
    entries.push({
      at: detail.event.receivedAt,
      order: 0,
      kind: 'delivery',
      what: `fetched from the provider's API by a backfill (never delivered): claimed (the event was created) by ${detail.event.originDetail ?? 'a backfill'}`,
    });
  }
  detail.deliveries.forEach((d, i) => {
    entries.push({
      at: d.receivedAt,
      order: 0,
      kind: 'delivery',
      what:
        i === 0 && !d.duplicate
          ? 'delivery 1: claimed (the event was created)'
          : `delivery ${i + 1}: duplicate ${d.matchedBy === 'body' ? '(the same body under another id)' : '(the same event id)'}, nothing new done`,
    });
  });
  if (detail.deliveryCount > detail.deliveries.length) {
    // The log keeps the first DELIVERY_LOG_ROWS deliveries in full and counts the rest.
    entries.push({
      at: detail.lastDeliveryAt ?? detail.event.receivedAt,
      order: 0,
      kind: 'delivery',
      what: `... and ${detail.deliveryCount - detail.deliveries.length} more deliveries (counted, not logged one by one), the last at this time`,
    });
  }
  const attemptsByRun = new Map<number, typeof detail.attempts>();
  for (const a of detail.attempts) attemptsByRun.set(a.runId, [...(attemptsByRun.get(a.runId) ?? []), a]);
  for (const a of detail.attempts) {
    entries.push({ at: a.startedAt, order: 2, kind: 'attempt', what: html`<b>${a.handler}</b> attempt ${a.attempt} started (generation ${a.generation})` });
    if (a.endedAt && a.outcome) {
      const what =
        a.outcome === 'done'
          ? html`<b>${a.handler}</b> attempt ${a.attempt}: done`
          : a.outcome === 'retry'
            ? html`<b>${a.handler}</b> attempt ${a.attempt} failed, will retry: <code>${a.error ?? ''}</code>`
            : html`<b>${a.handler}</b> attempt ${a.attempt} failed for good (dead letter): <code>${a.error ?? ''}</code>`;
      entries.push({ at: a.endedAt, order: 4, kind: a.outcome === 'done' ? 'done' : 'failure', what });
    } else {
      const later = (attemptsByRun.get(a.runId) ?? []).some((b) => b.startedAt > a.startedAt);
      if (later)
        entries.push({
          at: a.startedAt,
          order: 3,
          kind: 'failure',
          what: html`<b>${a.handler}</b> attempt ${a.attempt} was cut short (its worker died or lost its lease); the next attempt took over`,
        });
    }
  }
  const actionsByRunGeneration = new Map(detail.operatorActions.filter((a) => a.mode === 'replay').map((a) => [`${a.runId}:${a.generation}`, a.createdAt]));
  for (const s of detail.steps) {
    const replayedAt = s.reusedFrom === null ? undefined : actionsByRunGeneration.get(`${s.runId}:${s.generation}`);
    entries.push({
      at: replayedAt ?? s.completedAt,
      order: 3,
      kind: 'step',
      what: html`<b>${s.handler}</b> step <b>${s.name}</b> (${s.kind ?? 'step'}, generation ${s.generation}) ${s.reusedFrom === null ? 'committed' : html`reused from generation ${s.reusedFrom} (not run again)`}${s.idempotencyKey ? html`, key <code>${s.idempotencyKey}</code>` : ''}: <code>${JSON.stringify(s.result)}</code>`,
    });
  }
  for (const a of detail.operatorActions) {
    entries.push({
      at: a.createdAt,
      order: 1,
      kind: 'operator',
      what: html`<b>${a.mode}</b> of <b>${a.handler ?? 'the event'}</b> by ${a.actor} from ${a.fromState} (generation ${a.generation}): ${a.reason}`,
    });
  }
  entries.sort((x, y) => x.at.getTime() - y.at.getTime() || x.order - y.order);
  return entries;
}

function timeline(detail: EventDetail) {
  return html`<table class="timeline"><tr><th>When</th><th>What</th></tr>${timelineEntries(detail).map(
    (x) => html`<tr data-kind="${x.kind}"><td>${x.at.toISOString()}</td><td><span class="kind">${x.kind}</span> ${x.what}</td></tr>`,
  )}</table>`;
}

/** Re-drive and replay forms for the runs that allow them (read-only: none). */
function actions(detail: EventDetail, readOnly: boolean) {
  const e = detail.event;
  if (readOnly) return html`<p class="muted">Read-only admin (ADMIN_READ_ONLY=true): no actions.</p>`;
  const redrivable = (r: RunRow) => r.state === 'failed' || r.state === 'received' || (r.state === 'processing' && r.leaseUntil !== null && r.leaseUntil.getTime() < Date.now());
  const forms = [];
  const toRedrive = detail.runs.filter(redrivable);
  if (toRedrive.length > 0 || (e.state === 'received' && detail.runs.length === 0)) {
    forms.push(html`<form class="action redrive" data-url="/admin/api/events/${e.id}/redrive">
<h3>Re-drive ${toRedrive.length > 0 ? toRedrive.map((r) => r.handler).join(', ') : 'the dispatch'}</h3>
<p class="muted">Finishes what was started: same generation, committed steps skipped, the same idempotency keys (the APIs apply nothing twice). Use it after fixing what made the run fail.</p>
<label>Reason <input name="reason" placeholder="what was fixed"></label><br><button type="submit" value="redrive">Re-drive</button><div class="result"></div></form>`);
  }
  for (const run of detail.runs.filter((r) => r.state === 'done' || r.state === 'failed')) {
    const steps = detail.steps.filter((s) => s.runId === run.id && s.generation === run.generation);
    forms.push(html`<form class="action replay" data-url="/admin/api/events/${e.id}/replay" data-handler="${run.handler}">
<h3>Replay steps of ${run.handler} (generation ${run.generation} -> ${run.generation + 1})</h3>
<p class="muted">Does the chosen steps AGAIN: each external one with a NEW key (its effect happens once more); every other step's recorded result is reused. Preview first.</p>
${steps.length === 0 ? html`<p class="muted">No recorded step.</p>` : steps.map((s) => html`<label><input type="checkbox" name="step" value="${s.name}"> ${s.name} (${s.kind ?? 'step'})</label>`)}
<label><input type="checkbox" name="all_steps"> all steps, local writes included</label><br>
<label>Reason <input name="reason" placeholder="why do it again"></label><br>
<button type="submit" value="preview">Preview (dry run)</button><button type="submit" value="replay" disabled>Replay</button><div class="result"></div></form>`);
  }
  return forms.length === 0 ? html`<p class="muted">Nothing to re-drive or replay while runs are in flight.</p>` : html`${forms}`;
}

export function mountAdminViews(
  admin: Hono<AdminEnv>,
  deps: { pool: Pool; queries: Queries; ops: Operations; slots: SearchSlots; budget: AdminBudget; recentDuplicates: RecentDuplicates },
  settings: AdminSettings,
): void {
  const { pool, queries, ops } = deps;
  // Served, not inline: the pages' Content-Security-Policy allows styles and scripts from the admin only.
  admin.get('/assets/admin.css', (c) => c.body(PAGE_STYLE, 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'max-age=3600' }));
  admin.get('/assets/event-actions.js', (c) => c.body(EVENT_ACTIONS_JS, 200, { 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'max-age=3600' }));
  admin.get('/', (c) => c.redirect('/admin/events', 302));
  admin.get('/events', async (c) => {
    const raw = c.req.query();
    const search = parseEventSearch(raw, { maxLimit: 1_000 });
    const input = raw as SearchInput;
    const form = searchForm(input);
    if (!search.ok) return c.html(page('Events', html`${form}<p class="refused">${search.message}</p>`), 400);
    const searching = Object.values(raw).some((value) => value !== '' && value !== undefined);
    return inSearchSlot(c, c.get('actor'), deps.slots, deps.budget, () => eventsPage(c, { input, form, filter: search.filter, searching }));
  });

  async function eventsPage(c: Context<AdminEnv>, at: { input: SearchInput; form: ReturnType<typeof html>; filter: EventFilter; searching: boolean }): Promise<Response> {
    const { input, form, searching } = at;
    let events: EventSummary[];
    try {
      events = await ops.list(at.filter, { signal: c.req.raw.signal });
    } catch (error) {
      if (!(error instanceof SearchTooSlowError)) throw error;
      return c.html(page('Events', html`${form}<p class="refused">${error.message}</p>`), 422);
    }
    const search = { filter: at.filter };
    const limit = search.filter.limit ?? 50;
    const next = events.length === limit ? `/admin/events?${searchQuery({ ...input, before: String(events[events.length - 1]!.id) })}` : null;
    const [stuck, failed] = searching ? [[], []] : await Promise.all([queries.listStuckRuns(pool, 60_000, 50), ops.list({ state: 'failed', limit: 50 })]);
    return c.html(
      page(
        'Events',
        html`${form}
${stuck.length > 0 ? html`<h2>Stuck (${stuck.length})</h2><p class="muted">A handler run processing past its lease, or received for over a minute.</p>${eventTable(stuck)}` : ''}
${failed.length > 0 ? html`<h2>Dead letters (${failed.length}${failed.length === 50 ? '+' : ''})</h2><p class="muted">A handler run failed for good: open one to re-drive or replay it, see them <a href="/admin/failures">grouped by cause</a>, or <a href="/admin/events?state=failed">search them</a>.</p>${eventTable(failed)}` : ''}
<h2>${searching ? 'Matching events' : 'Recent events'} <span class="muted">(${events.length}${next ? '+' : ''}, newest first)</span></h2>${eventTable(events)}
${next ? html`<p class="pager"><a rel="next" href="${next}">Next page</a></p>` : ''}
${searching && !settings.readOnly ? bulkRedriveForm(input) : ''}
${searching ? '' : html`<h2>Recent duplicates (seen by this ingest instance)</h2>${duplicatesTable(deps.recentDuplicates.list(25))}`}`,
        settings.readOnly ? [] : ['/admin/assets/event-actions.js'],
      ),
    );
  }

  admin.get('/failures', async (c) => {
    const showResolved = c.req.query('resolved') === 'true';
    const groups = await ops.failureGroups({ includeResolved: showResolved });
    return c.html(
      page(
        'Failures',
        html`<p class="muted">Failed and retrying handler runs, grouped by handler and the shape of their last error (ids, uuids and numbers other than a status code stripped: docs/operating.md, "Failure groups"). Newest failure first. A resolved group comes back when one of its runs fails again.
${showResolved ? html`<a href="/admin/failures">Hide resolved</a>` : html`<a href="/admin/failures?resolved=true">Show resolved</a>`}</p>
${groups.length === 0 ? html`<p class="muted">No failing runs${showResolved ? '' : ' outside resolved groups'}.</p>` : groups.map((g) => failureGroup(g, settings.readOnly))}`,
        settings.readOnly ? [] : ['/admin/assets/event-actions.js'],
      ),
    );
  });

  admin.get('/pauses', async (c) => {
    const pauses = await ops.pauses();
    const resumeForm = (p: { scope: string; name: string }) =>
      settings.readOnly
        ? ''
        : html`<form class="action pause-action" data-url="/admin/api/pauses/resume" data-scope="${p.scope}" data-name="${p.name}"><label>Reason <input name="reason" placeholder="why resume now"></label><button type="submit">Resume</button><div class="result"></div></form>`;
    return c.html(
      page(
        'Pauses',
        html`<p class="muted">A paused handler or source still receives: deliveries are verified, claimed and answered 2xx. No new run starts; its runs wait (received, waiting: paused) and start on resume, under their limits. Also: <code>oncehook pause|resume|paused</code>, the admin API.</p>
${
  pauses.length === 0
    ? html`<p class="muted">Nothing is paused.</p>`
    : html`<table><tr><th>What</th><th>Since</th><th>By</th><th>Reason</th><th>Runs waiting</th><th></th></tr>
${pauses.map((p) => html`<tr><td>${p.scope} <code>${p.name}</code>${p.stopNow ? ' (runs in progress stopped too)' : ''}</td><td>${new Date(p.pausedAt).toISOString()}</td><td>${p.actor}</td><td>${p.reason}</td><td>${p.waiting ?? 0}</td><td>${resumeForm(p)}</td></tr>`)}</table>`
}
${
  settings.readOnly
    ? html`<p class="muted">Read-only admin (ADMIN_READ_ONLY=true): no actions.</p>`
    : html`<form class="action pause-action" data-url="/admin/api/pauses"><h3>Pause</h3>
<label>What <select name="scope"><option value="handler">handler or destination</option><option value="source">source</option></select></label>
<label>Name <input name="name" placeholder="send-receipt"></label><br><label>Reason <input name="reason" placeholder="the email provider is down"></label><br>
<label><input type="checkbox" name="now"> also stop runs in progress at their next step (committed steps stay committed)</label><br>
<button type="submit">Pause</button><div class="result"></div></form>`
}`,
        settings.readOnly ? [] : ['/admin/assets/event-actions.js'],
      ),
    );
  });

  admin.get('/destinations', async (c) => {
    const configured = settings.destinations ?? [];
    if (typeof configured === 'string') {
      return c.html(
        page('Destinations', html`<p class="state-failed">The destinations' configuration is invalid (the workers refuse to start with it):</p><pre>${configured}</pre>`),
        500,
      );
    }
    const rows = await destinationStates(ops, configured);
    return c.html(
      page(
        'Destinations',
        html`<p class="muted">Each verified event is forwarded to these services, signed with Standard Webhooks, one key per event and destination (docs/destinations.md). Secrets and configured headers are never shown. Pause one like a handler (<code>oncehook pause destination &lt;name&gt;</code>, or the Pauses page).</p>
${
  rows.length === 0
    ? html`<p class="muted">No destination is configured in this process's environment (DESTINATION_URL, ONCEHOOK_DESTINATIONS_FILE).</p>`
    : html`<table><tr><th>Name</th><th>URL</th><th>Takes</th><th>Limits</th><th>In flight</th><th>Waiting</th><th>Dead letters</th><th>Paused</th><th>Last error</th></tr>
${rows.map(
  (
    r,
  ) => html`<tr><td><code>${r.name}</code></td><td><code>${r.url}</code></td><td>${r.sources.join(', ')} ${r.types.join(', ')}${r.filter.length ? html`<div class="muted">filter: ${r.filter.join(', ')}</div>` : ''}</td>
<td>${r.concurrency ? `concurrency ${JSON.stringify(r.concurrency)}` : ''}${r.rateLimit ? ` rate ${JSON.stringify(r.rateLimit)}` : ''}</td><td>${r.inFlight}</td><td>${r.waiting}</td>
<td class="${r.deadLetters > 0 ? 'state-failed' : ''}">${r.deadLetters}</td><td>${r.paused ?? '-'}</td><td class="muted">${r.lastError ?? '-'}</td></tr>`,
)}</table>`
}`,
      ),
    );
  });

  admin.get('/events/:id{[0-9]{1,16}}', async (c) => {
    const detail = await ops.show(Number(c.req.param('id')));
    if (!detail) return c.html(page('Not found', html`<p>No event ${c.req.param('id')}.</p>`), 404);
    const e = detail.event;
    return c.html(
      page(
        `Event ${e.id}`,
        html`<table>
<tr><th>Provider / event id</th><td><code>${e.source}/${e.eventId}</code> (${e.kind})</td></tr>
<tr><th>Type</th><td>${e.type}</td></tr><tr><th>State</th><td class="state-${e.state}">${e.state}</td></tr>
<tr><th>Received</th><td>${e.receivedAt.toISOString()}</td></tr><tr><th>Signed at</th><td>${e.signedAt?.toISOString() ?? '-'}</td></tr>
<tr><th>Finished</th><td>${e.finishedAt?.toISOString() ?? '-'}</td></tr><tr><th>Note</th><td>${e.note ?? '-'}</td></tr>
<tr><th>Deliveries</th><td class="deliveries">${detail.deliveryCount}</td></tr>
</table>
<h2>Actions</h2>${actions(detail, settings.readOnly)}
<h2>Handler runs</h2>${
          detail.runs.length === 0
            ? html`<p class="muted">None.</p>`
            : html`<table><tr><th>Handler</th><th>State</th><th>Attempts</th><th>Generation</th><th>Lease</th><th>Last error</th></tr>
${detail.runs.map((r) => html`<tr><td>${r.handler}</td><td class="state-${r.state}">${r.state}${r.waiting ? ` (waiting: ${r.waiting})` : ''}</td><td>${r.attempts}</td><td>${r.generation}</td><td>${r.leaseUntil ? `until ${r.leaseUntil.toISOString()}` : '-'}</td><td>${r.lastError ?? '-'}</td></tr>`)}</table>`
        }
<h2>Timeline</h2>${timeline(detail)}
<h2>Payload</h2>${
          e.prunedAt
            ? html`<p class="muted">Deleted by retention on ${e.prunedAt.toISOString()} (RETENTION_DAYS), with the runs and steps; the key is kept until KEY_RETENTION_DAYS, so a redelivery is still a duplicate.</p>`
            : html`<pre><code>${detail.payloadView.text}</code></pre>`
        }`,
        settings.readOnly ? [] : ['/admin/assets/event-actions.js'],
      ),
    );
  });
}
