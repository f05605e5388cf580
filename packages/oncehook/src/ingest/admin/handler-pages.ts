/**
 * The handler and destination pages (`/admin/handlers`, `/admin/handlers/:name`; the API's
 * `GET /admin/api/handlers`): each loaded handler and destination with its source and type,
 * what it declares (concurrency, rate limit, circuit breaker, retries, priority), its runs now
 * (in flight, waiting, dead letters), pause, last error, the last hour's attempts by outcome and
 * latency (the activity minutes), its open failure groups, and the workers that have it loaded
 * (seen at their reconciler passes within the last WORKER_SEEN_S).
 */
import type { HandlerState, Operations, RegistryEntry } from '@oncehook/core';
import type { Hono } from 'hono';
import { html } from 'hono/html';
import { searchQuery } from '../../event-search.js';
import { activitySeries, lineChart, quantile } from './activity-page.js';
import type { AdminEnv, AdminSettings } from './auth.js';

/** A worker is listed with its handlers while it was seen this recently (its reconciler passes touch it). */
export const WORKER_SEEN_S = 120;

export interface HandlerOverview extends RegistryEntry {
  destination: boolean;
  state: HandlerState;
  lastHour: { done: number; retry: number; failed: number; p95Seconds: number };
  openFailureGroups: number;
}

async function overview(ops: Operations, destinations: string[]): Promise<HandlerOverview[]> {
  const [registry, activity, groups] = await Promise.all([ops.handlers(WORKER_SEEN_S), ops.activity(3_600), ops.failureGroups({ limit: 10_000 })]);
  const states = new Map((await ops.handlerStates(registry.map((h) => h.name))).map((s) => [s.handler, s]));
  return registry.map((h) => {
    const runs = activity.filter((row) => row.kind === 'run' && row.name === h.name);
    const count = (outcome: string) => runs.filter((r) => r.result === outcome).reduce((n, r) => n + r.count, 0);
    const histogram: number[] = [];
    for (const r of runs) {
      for (const [i, n] of (r.buckets ?? []).entries()) histogram[i] = (histogram[i] ?? 0) + n;
    }
    return {
      ...h,
      destination: destinations.includes(h.name),
      state: states.get(h.name) ?? { handler: h.name, inFlight: 0, waiting: 0, failed: 0, paused: null, lastError: null },
      lastHour: { done: count('done'), retry: count('retry'), failed: count('failed'), p95Seconds: quantile(0.95, histogram) },
      openFailureGroups: groups.filter((g) => g.handler === h.name).length,
    };
  });
}

function declared(settings: Record<string, unknown> | null): string {
  if (!settings) return '-';
  const s = settings as {
    priority?: string;
    concurrency?: { limit: number; byKey: boolean };
    rateLimit?: { limit: number; periodMs: number; byKey: boolean };
    circuitBreaker?: { consecutiveFailures: number };
    retries?: { maxAttempts?: number; backoffMs?: number };
  };
  const parts: string[] = [];
  if (s.concurrency) parts.push(`concurrency ${s.concurrency.limit}${s.concurrency.byKey ? ' per key' : ''}`);
  if (s.rateLimit) parts.push(`${s.rateLimit.limit} per ${s.rateLimit.periodMs / 1000} s${s.rateLimit.byKey ? ' per key' : ''}`);
  if (s.circuitBreaker) parts.push(`breaker after ${s.circuitBreaker.consecutiveFailures} failures`);
  if (s.retries?.maxAttempts !== undefined) parts.push(`${s.retries.maxAttempts} attempts`);
  if (s.priority && s.priority !== 'normal') parts.push(`priority ${s.priority}`);
  return parts.length > 0 ? parts.join(', ') : 'no limits';
}

const seconds = (s: number) => (s === 0 ? '-' : s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(1)} s`);

export function mountHandlerPages(
  admin: Hono<AdminEnv>,
  deps: { ops: Operations; page: (title: string, body: ReturnType<typeof html>, scripts?: string[]) => ReturnType<typeof html> },
  settings: AdminSettings,
): void {
  const destinationNames = () => (typeof settings.destinations === 'string' ? [] : (settings.destinations ?? []).map((d) => d.name));

  admin.get('/api/handlers', async (c) => c.json({ handlers: await overview(deps.ops, destinationNames()) }));

  admin.get('/handlers', async (c) => {
    const rows = await overview(deps.ops, destinationNames());
    return c.html(
      deps.page(
        'Handlers',
        html`<p class="muted">Every handler and destination a worker has loaded (recorded at its start), with what it declares, its runs now and the last hour's attempts. Workers: those seen with it in the last ${WORKER_SEEN_S} s.</p>
${
  rows.length === 0
    ? html`<p class="muted">No worker has registered a handler yet.</p>`
    : html`<table><tr><th>Handler</th><th>Takes</th><th>Declares</th><th>In flight</th><th>Waiting</th><th>Dead letters</th><th>Last hour</th><th>p95</th><th>Failure groups</th><th>Paused</th><th>Workers</th></tr>
${rows.map(
  (
    h,
  ) => html`<tr data-handler="${h.name}"><td><a href="/admin/handlers/${h.name}">${h.name}</a>${h.destination ? ' (destination)' : ''}</td><td>${h.source} ${h.type}</td><td>${declared(h.settings)}</td>
<td>${h.state.inFlight}</td><td>${h.state.waiting}</td><td class="${h.state.failed > 0 ? 'state-failed' : ''}">${h.state.failed}</td>
<td>${h.lastHour.done} done, ${h.lastHour.retry} retried, ${h.lastHour.failed} failed</td><td>${seconds(h.lastHour.p95Seconds)}</td>
<td>${h.openFailureGroups > 0 ? html`<a href="/admin/failures">${h.openFailureGroups}</a>` : '0'}</td><td>${h.state.paused ?? '-'}</td><td class="workers">${h.workers.length}</td></tr>`,
)}</table>`
}`,
      ),
    );
  });

  admin.get('/handlers/:name{[a-z0-9][a-z0-9._-]{0,62}}', async (c) => {
    const name = c.req.param('name');
    const h = (await overview(deps.ops, destinationNames())).find((row) => row.name === name);
    if (!h) return c.html(deps.page('Not found', html`<p>No handler or destination named ${name} has been registered.</p>`), 404);
    const series = activitySeries(
      (await deps.ops.activity(3_600)).filter((row) => row.kind === 'run' && row.name === name),
      '1h',
    );
    const groups = await deps.ops.failureGroups({ handler: name });
    return c.html(
      deps.page(
        `${h.destination ? 'Destination' : 'Handler'} ${name}`,
        html`<table>
<tr><th>Takes</th><td>${h.source} ${h.type}${h.kind ? ` (${h.kind})` : ''}</td></tr><tr><th>Description</th><td>${h.description ?? '-'}</td></tr>
<tr><th>Declares</th><td>${declared(h.settings)}</td></tr>
<tr><th>Runs now</th><td>${h.state.inFlight} in flight, ${h.state.waiting} waiting, ${h.state.failed} dead letters</td></tr>
<tr><th>Paused</th><td>${h.state.paused ?? 'no'}</td></tr><tr><th>Last error</th><td><code>${h.state.lastError ?? '-'}</code></td></tr>
<tr><th>Loaded by</th><td class="workers">${h.workers.length === 0 ? html`<span class="muted">no worker seen in the last ${WORKER_SEEN_S} s</span>` : h.workers.join(', ')}</td></tr>
<tr><th>Registered</th><td>first ${h.firstSeenAt.toISOString()}, last ${h.lastSeenAt.toISOString()}</td></tr>
</table>
<p><a href="/admin/events?${searchQuery({ handler: name })}">Its events</a> - <a href="/admin/events?${searchQuery({ handler: name, state: 'failed' })}">its dead letters</a> - pause or resume it on the <a href="/admin/pauses">Pauses</a> page</p>
${lineChart(series.runs, series.times)}${lineChart(series.latency, series.times)}
<h2>Failure groups (${groups.length})</h2>${
          groups.length === 0
            ? html`<p class="muted">None open.</p>`
            : html`<ul>${groups.map((g) => html`<li><a href="/admin/events?${searchQuery({ group: g.id, handler: name })}">${g.failed + g.retrying} run(s)</a>: <code>${g.shape}</code></li>`)}</ul>`
        }`,
      ),
    );
  });
}
