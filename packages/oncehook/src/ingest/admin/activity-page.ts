/**
 * The Activity page (`/admin/activity?range=1h|1d`) and its data (`GET /admin/api/activity`):
 * deliveries per minute by result, run attempts by outcome, run latency percentiles, the
 * backlog and the oldest waiting run, runs waiting per reason, from the minutes Oncehook writes
 * itself (core activity.ts, migrations/0013). Drawn on the server as SVG lines (no script, no
 * library, a few kilobytes per chart: light over a slow link; the CSP allows it).
 */
import type { ActivityRow, Operations } from '@oncehook/core';
import { RUN_LATENCY_BUCKETS_S } from '@oncehook/shared';
import type { Context, Hono } from 'hono';
import { html } from 'hono/html';
import type { AdminEnv } from './auth.js';

export const RANGES = { '1h': { seconds: 3_600, step: 60 }, '1d': { seconds: 86_400, step: 300 } } as const;
export type Range = keyof typeof RANGES;

/** One chart's data: a value per time step for each named line. */
export interface Chart {
  title: string;
  unit: string;
  lines: { name: string; values: number[] }[];
}

export interface ActivitySeries {
  range: Range;
  /** The start of each step (ISO). */
  times: string[];
  deliveries: Chart;
  runs: Chart;
  latency: Chart;
  backlog: Chart;
  waiting: Chart;
}

/** The latency under which fraction `q` of the attempts of a histogram fall (linear within a bucket, as Prometheus' histogram_quantile). */
export function quantile(q: number, buckets: number[]): number {
  const total = buckets.reduce((a, b) => a + b, 0);
  if (total === 0) return 0;
  let seen = 0;
  for (let i = 0; i < buckets.length; i += 1) {
    const n = buckets[i]!;
    if (seen + n >= q * total) {
      const lower = i === 0 ? 0 : RUN_LATENCY_BUCKETS_S[i - 1]!;
      const upper = RUN_LATENCY_BUCKETS_S[i] ?? RUN_LATENCY_BUCKETS_S[RUN_LATENCY_BUCKETS_S.length - 1]!;
      return n === 0 ? upper : lower + (upper - lower) * ((q * total - seen) / n);
    }
    seen += n;
  }
  return RUN_LATENCY_BUCKETS_S[RUN_LATENCY_BUCKETS_S.length - 1]!;
}

/** The stored minutes as the page's charts, one value per step of the range. */
export function activitySeries(rows: ActivityRow[], range: Range, now = new Date()): ActivitySeries {
  const { seconds, step } = RANGES[range];
  const end = Math.floor(now.getTime() / 1000 / step) * step + step;
  const start = end - seconds;
  const steps = seconds / step;
  const at = (minute: Date) => Math.floor((minute.getTime() / 1000 - start) / step);
  const zeros = () => new Array<number>(steps).fill(0);
  const sum = new Map<string, number[]>();
  const last = new Map<string, number[]>();
  const histograms = Array.from({ length: steps }, () => new Array<number>(RUN_LATENCY_BUCKETS_S.length + 1).fill(0));
  for (const row of rows) {
    const i = at(new Date(row.minute));
    if (i < 0 || i >= steps) continue;
    if (row.kind === 'backlog') {
      if (row.name !== '') continue;
      const series = last.get(row.result) ?? zeros();
      series[i] = row.count;
      last.set(row.result, series);
      continue;
    }
    const key = `${row.kind}:${row.result}`;
    const series = sum.get(key) ?? zeros();
    series[i]! += row.count;
    sum.set(key, series);
    if (row.kind === 'run' && row.buckets) {
      for (const [b, n] of row.buckets.entries()) histograms[i]![b]! += n;
    }
  }
  const perMinute = (values: number[]) => values.map((v) => v / (step / 60));
  const line = (name: string, values: number[] | undefined) => ({ name, values: values ?? zeros() });
  return {
    range,
    times: Array.from({ length: steps }, (_, i) => new Date((start + i * step) * 1000).toISOString()),
    deliveries: {
      title: 'Deliveries per minute',
      unit: '/min',
      lines: ['new', 'duplicate', 'rejected', 'error', 'expired'].map((r) => line(r, perMinute(sum.get(`delivery:${r}`) ?? zeros()))),
    },
    runs: { title: 'Run attempts per minute', unit: '/min', lines: ['done', 'retry', 'failed', 'lease-lost'].map((r) => line(r, perMinute(sum.get(`run:${r}`) ?? zeros()))) },
    latency: {
      title: 'Run attempt latency (lease to verdict)',
      unit: 's',
      lines: [0.5, 0.95, 0.99].map((q) =>
        line(
          `p${Math.round(q * 100)}`,
          histograms.map((h) => quantile(q, h)),
        ),
      ),
    },
    backlog: {
      title: 'Backlog: runs received and processing; the oldest received, seconds',
      unit: '',
      lines: [line('received', last.get('received')), line('processing', last.get('processing')), line('oldest received (s)', last.get('oldest_received_s'))],
    },
    waiting: {
      title: 'Runs waiting (flow control), by reason',
      unit: '',
      lines: ['paused', 'concurrency', 'rate-limit'].map((r) => line(r, last.get(`waiting:${r}`))),
    },
  };
}

const COLORS = ['#1a7f37', '#6f42c1', '#b3261e', '#9a6700', '#0969da'];

function round(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 1 ? value.toFixed(1) : value.toFixed(3).replace(/0+$/, '').replace(/\.$/, '');
}

/** One chart as SVG: a polyline per line, the top value on the axis, the first and last time. */
export function lineChart(chart: Chart, times: string[]) {
  const width = 900;
  const height = 160;
  const left = 48;
  const bottom = 18;
  const top = 8;
  const max = Math.max(0, ...chart.lines.flatMap((l) => l.values));
  const x = (i: number) => left + (times.length <= 1 ? 0 : (i / (times.length - 1)) * (width - left - 8));
  const y = (v: number) => top + (height - top - bottom) * (1 - (max === 0 ? 0 : v / max));
  const label = (iso: string) => iso.slice(11, 16);
  return html`<figure class="chart"><figcaption>${chart.title}${chart.lines.map(
    (l, i) =>
      html` <span class="legend" data-line="${l.name}"><svg width="10" height="10"><rect width="10" height="10" fill="${COLORS[i % COLORS.length]}"/></svg> ${l.name} (last ${round(l.values[l.values.length - 1] ?? 0)}, max ${round(Math.max(0, ...l.values))})</span>`,
  )}</figcaption>
<svg viewBox="0 0 ${width} ${height}" width="100%" role="img" aria-label="${chart.title}">
<line x1="${left}" y1="${height - bottom}" x2="${width - 8}" y2="${height - bottom}" stroke="#c8ccd6"/><line x1="${left}" y1="${top}" x2="${left}" y2="${height - bottom}" stroke="#c8ccd6"/>
<text x="${left - 4}" y="${top + 10}" text-anchor="end" font-size="11" fill="#667">${round(max)}${chart.unit}</text><text x="${left - 4}" y="${height - bottom}" text-anchor="end" font-size="11" fill="#667">0</text>
<text x="${left}" y="${height - 4}" font-size="11" fill="#667">${label(times[0] ?? '')}</text><text x="${width - 8}" y="${height - 4}" text-anchor="end" font-size="11" fill="#667">${label(times[times.length - 1] ?? '')} UTC</text>
${chart.lines.map(
  (l, i) =>
    html`<polyline class="line" data-line="${l.name}" fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="1.5" points="${l.values.map((v, j) => `${x(j).toFixed(1)},${y(v).toFixed(1)}`).join(' ')}"/>`,
)}
</svg></figure>`;
}

function rangeOf(c: Context): Range | null {
  const value = c.req.query('range') ?? '1h';
  return value in RANGES ? (value as Range) : null;
}

export function mountActivity(admin: Hono<AdminEnv>, deps: { ops: Operations; page: (title: string, body: ReturnType<typeof html>) => ReturnType<typeof html> }): void {
  const read = async (range: Range) => activitySeries(await deps.ops.activity(RANGES[range].seconds), range);
  const refused = 'range is 1h or 1d';
  admin.get('/api/activity', async (c) => {
    const range = rangeOf(c);
    if (range === null) return c.json({ error: 'bad_filter', message: refused }, 400);
    return c.json(await read(range));
  });
  admin.get('/activity', async (c) => {
    const range = rangeOf(c);
    if (range === null) return c.html(deps.page('Activity', html`<p class="refused">${refused}</p>`), 400);
    const series = await read(range);
    return c.html(
      deps.page(
        'Activity',
        html`<p class="muted">The last ${range === '1h' ? 'hour, per minute' : 'day, per 5 minutes'} (<a href="/admin/activity?range=${range === '1h' ? '1d' : '1h'}">the last ${range === '1h' ? 'day' : 'hour'}</a>), from what every ingest and worker process counts (written each ACTIVITY_FLUSH_MS) and the backlog the reconciler samples. Times in UTC. Prometheus and Grafana show the same and more (ops/).</p>
${[series.deliveries, series.runs, series.latency, series.backlog, series.waiting].map((chart) => lineChart(chart, series.times))}`,
      ),
    );
  });
}
