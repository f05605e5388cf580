/**
 * `npm run soak -- [--minutes M] [--rate R] [--sample-seconds S] [--age-after-seconds A] [--band B] [--out DIR]`
 * `npm run soak -- --judge DIR` (a finished run's samples judged and drawn again)
 *
 * A soak: M minutes (default 30) of steady load, R events a second (default 40: about half of
 * what this 2-core machine handles end to end with two workers), through ingest and two
 * workers on a Postgres and a Redis of the run's own, with retention running. The events are
 * the example shop's order payments (a local step, a receipt email and a shipment each, to the
 * sandbox APIs), 1 to 3 deliveries each. Every S seconds (default 60) it samples the RSS of
 * every process, Redis's memory, the sizes of Oncehook's tables and indexes in Postgres, and the
 * backlog (events not finished yet). To reach the steady state of a system that has run for
 * months within minutes, done events older than A seconds (default 120) are aged past the
 * payload horizon (retention then prunes them to their keys) and, after twice that, past the
 * key horizon (retention deletes them), so every table should stop growing.
 *
 * Writes DIR/soak.json (the samples) and DIR/soak.svg (one chart per measure), and prints the
 * verdict per measure: flat when the least-squares trend over the samples after the first third
 * (the warm-up) raises the measure by at most B (default 0.15, i.e. 15%) of its mean over that
 * span (a measure that shrinks is flat: nothing accumulates); otherwise growing, with its rate. Exits 1 when a measure grows, or when an acknowledged
 * event is not done once the load stops.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { migrate } from '@oncehook/core';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import {
  createScratchDatabase,
  makeEvent,
  parseScriptArgs,
  ProviderSimulator,
  residentMb,
  simulatorSourcesEnv,
  spawnService,
  startOwnPostgres,
  startOwnRedis,
  startSandbox,
  storedIdOf,
  type Service,
} from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { Redis } from 'ioredis';

export interface SoakOptions {
  minutes: number;
  rate: number;
  sampleSeconds: number;
  ageAfterSeconds: number;
  band: number;
  outDir: string;
  log?: (line: string) => void;
}

/** One sample: seconds since the start, then each measure's value. */
export interface SoakSample {
  t: number;
  values: Record<string, number>;
}

export interface Verdict {
  measure: string;
  mean: number;
  /** The trend over the judged span, as a share of the mean (0.05 = grew 5%; negative: shrank). */
  change: number;
  /** Not growing: the trend is below the band (shrinking is flat enough: nothing accumulates). */
  flat: boolean;
}

export interface SoakReport {
  options: Omit<SoakOptions, 'log'>;
  samples: SoakSample[];
  verdicts: Verdict[];
  events: { sent: number; acknowledged: number; done: number; notDone: number };
  violations: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Measures and their unit, in the order the chart draws them. */
const MEASURES: [string, string][] = [
  ['rss.ingest', 'MB'],
  ['rss.worker1', 'MB'],
  ['rss.worker2', 'MB'],
  ['redis.used_memory', 'MB'],
  ['postgres.events', 'MB'],
  ['postgres.runs_steps_attempts', 'MB'],
  ['postgres.deliveries', 'MB'],
  ['backlog.events', 'events'],
];

/**
 * The least-squares trend of `points` over their span, as a share of their mean, or of `floor`
 * when the mean is smaller: a measure that is near zero by nature (the backlog of a system that
 * keeps up) is judged against the least amount that would mean something accumulated.
 */
export function judge(measure: string, points: { t: number; v: number }[], band: number, floor = 1): Verdict {
  const n = points.length;
  const mean = points.reduce((s, p) => s + p.v, 0) / n;
  const tMean = points.reduce((s, p) => s + p.t, 0) / n;
  const cov = points.reduce((s, p) => s + (p.t - tMean) * (p.v - mean), 0);
  const varT = points.reduce((s, p) => s + (p.t - tMean) ** 2, 0);
  const slope = varT === 0 ? 0 : cov / varT;
  const span = points[n - 1]!.t - points[0]!.t;
  const change = (slope * span) / Math.max(Math.abs(mean), floor);
  return { measure, mean, change, flat: change <= band };
}

/**
 * The verdict per measure over the samples after the first third (the warm-up). The backlog's
 * floor is one second of load (`rate` events): fewer waiting is work in flight, not a queue (a
 * 30-minute run at 40 events/s judged its 0-14 waiting events, mean 3, "growing" against a
 * floor of 1, and ended with none waiting); a backlog that gains 1 event a second still fails.
 */
export function verdictsOf(samples: SoakSample[], options: Pick<SoakOptions, 'band' | 'rate'>): Verdict[] {
  const judged = samples.slice(Math.floor(samples.length / 3));
  if (judged.length < 3) return [];
  return MEASURES.map(([measure]) =>
    judge(
      measure,
      judged.map((s) => ({ t: s.t, v: s.values[measure]! })).filter((p) => Number.isFinite(p.v)),
      options.band,
      measure === 'backlog.events' ? options.rate : 1,
    ),
  );
}

/** One small chart per measure, stacked, with its scale and verdict. */
export function plot(samples: SoakSample[], verdicts: Verdict[], title: string): string {
  const width = 720;
  const rowHeight = 110;
  const left = 70;
  const right = 20;
  const inner = width - left - right;
  const height = 40 + MEASURES.length * rowHeight;
  const tMax = Math.max(1, ...samples.map((s) => s.t));
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="20" font-size="14">${title}</text>`,
  ];
  MEASURES.forEach(([measure, unit], row) => {
    const top = 40 + row * rowHeight;
    const h = rowHeight - 35;
    const values = samples.map((s) => s.values[measure]!).filter((v) => Number.isFinite(v));
    const max = Math.max(1, ...values) * 1.1;
    const verdict = verdicts.find((v) => v.measure === measure);
    const label = verdict ? `${verdict.flat ? 'flat' : 'GROWING'} (${(verdict.change * 100).toFixed(1)}% over the judged span)` : '';
    parts.push(`<text x="${left}" y="${top + 10}">${measure} (${unit}) ${label}</text>`);
    parts.push(`<line x1="${left}" y1="${top + 15 + h}" x2="${left + inner}" y2="${top + 15 + h}" stroke="#999"/>`);
    parts.push(`<line x1="${left}" y1="${top + 15}" x2="${left}" y2="${top + 15 + h}" stroke="#999"/>`);
    parts.push(`<text x="${left - 5}" y="${top + 20}" text-anchor="end">${max.toFixed(max < 10 ? 1 : 0)}</text>`);
    parts.push(`<text x="${left - 5}" y="${top + 15 + h}" text-anchor="end">0</text>`);
    const points = samples
      .filter((s) => Number.isFinite(s.values[measure]))
      .map((s) => `${(left + (s.t / tMax) * inner).toFixed(1)},${(top + 15 + h - (s.values[measure]! / max) * h).toFixed(1)}`);
    parts.push(`<polyline fill="none" stroke="${verdict && !verdict.flat ? '#c00' : '#06c'}" stroke-width="1.5" points="${points.join(' ')}"/>`);
  });
  parts.push(`<text x="${left + inner}" y="${height - 5}" text-anchor="end">${(tMax / 60).toFixed(1)} min</text>`, '</svg>');
  return `${parts.join('\n')}\n`;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const run = Math.random().toString(36).slice(2, 8);
  const violations: string[] = [];
  log(`soak ${run}: ${options.minutes} min at ${options.rate} events/s, a sample every ${options.sampleSeconds} s, done events aged after ${options.ageAfterSeconds} s`);
  const postgres = await startOwnPostgres();
  const redis = await startOwnRedis();
  const sandbox = await startSandbox();
  const services: Service[] = [];
  const database = await createScratchDatabase({ baseUrl: postgres.baseUrl });
  const db = createPool(database.url, { max: 2 });
  const redisClient = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 2 });
  try {
    await migrate(db, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
    await redisClient.connect();
    const common = { DATABASE_URL: database.url, REDIS_URL: redis.url, QUEUE_PREFIX: `soak-${run}`, LOG_LEVEL: 'warn', DATABASE_POOL_SIZE: '10' };
    const ingest = spawnService('ingest', { ...common, PORT: '0', HOST: '127.0.0.1', ...simulatorSourcesEnv() });
    const workerEnv = {
      ...common,
      WORKER_CONCURRENCY: '16',
      METRICS_PORT: '0',
      ONCEHOOK_HANDLERS: 'examples/shop',
      SHOP_PAYMENT_API_URL: `${sandbox.url}/payment`,
      SHOP_EMAIL_API_URL: `${sandbox.url}/email`,
      SHOP_FULFILMENT_API_URL: `${sandbox.url}/fulfilment`,
      RETENTION_INTERVAL_MS: '5000',
    };
    const workers = [spawnService('worker', workerEnv), spawnService('worker', workerEnv)];
    services.push(ingest, ...workers);
    const port = /listening on (\d+)/.exec(await ingest.waitFor(/listening on \d+/))![1];
    await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
    const simulator = new ProviderSimulator({ baseUrl: `http://127.0.0.1:${port}`, invalidShare: 0 });

    const samples: SoakSample[] = [];
    const started = performance.now();
    const endAt = started + options.minutes * 60_000;
    const sample = async () => {
      const sizes = (
        await db.query<{ events: number; runs: number; deliveries: number; backlog: number }>(
          `SELECT pg_total_relation_size('oncehook.events') / 1048576.0 AS events,
                  (pg_total_relation_size('oncehook.handler_runs') + pg_total_relation_size('oncehook.steps')
                   + pg_total_relation_size('oncehook.run_attempts')) / 1048576.0 AS runs,
                  (pg_total_relation_size('oncehook.deliveries') + pg_total_relation_size('oncehook.delivery_counts')) / 1048576.0 AS deliveries,
                  (SELECT count(*) FROM oncehook.events WHERE state IN ('received', 'processing')) AS backlog`,
        )
      ).rows[0]!;
      const info = await redisClient.info('memory');
      const usedMemory = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN) / 1048576;
      const values: Record<string, number> = {
        'rss.ingest': residentMb(ingest.pid),
        'rss.worker1': residentMb(workers[0]!.pid),
        'rss.worker2': residentMb(workers[1]!.pid),
        'redis.used_memory': usedMemory,
        'postgres.events': Number(sizes.events),
        'postgres.runs_steps_attempts': Number(sizes.runs),
        'postgres.deliveries': Number(sizes.deliveries),
        'backlog.events': Number(sizes.backlog),
      };
      const t = Math.round((performance.now() - started) / 1000);
      samples.push({ t, values });
      log(`  ${String(t).padStart(5)} s ${MEASURES.map(([m]) => `${m} ${values[m]!.toFixed(1)}`).join(', ')}`);
    };
    // Ages done events as if they had been done for months (see the header), then samples.
    const ageAndSample = async () => {
      await db.query(
        `UPDATE oncehook.events SET received_at = received_at - interval '60 days'
          WHERE state = 'done' AND finished_at < now() - $1::int * interval '1 second' AND received_at > now() - interval '30 days'`,
        [options.ageAfterSeconds],
      );
      await db.query(
        `UPDATE oncehook.events SET received_at = received_at - interval '440 days'
          WHERE state = 'done' AND finished_at < now() - $1::int * interval '1 second'
            AND received_at BETWEEN now() - interval '100 days' AND now() - interval '30 days'`,
        [options.ageAfterSeconds * 2],
      );
      await sample();
    };

    // Steady load: one event started every 1/rate s (each with its deliveries and retries).
    let sent = 0;
    const inFlight = new Set<Promise<void>>();
    const loader = (async () => {
      const intervalMs = 1000 / options.rate;
      let next = performance.now();
      while (performance.now() < endAt) {
        const event = makeEvent('stripe', sent, run);
        sent += 1;
        const delivery = simulator.deliverEvent(event, 1 + Math.floor(Math.random() * 3)).finally(() => inFlight.delete(delivery));
        inFlight.add(delivery);
        next += intervalMs;
        await sleep(Math.max(0, next - performance.now()));
      }
      await Promise.all(inFlight);
    })();
    await sample();
    while (performance.now() < endAt) {
      await sleep(Math.min(options.sampleSeconds * 1000, Math.max(0, endAt - performance.now())));
      await ageAndSample();
    }
    await loader;
    log(`  load stopped: ${sent} events sent; waiting for the backlog to drain`);

    // Every acknowledged event done (or aged and pruned/deleted by retention: done before that).
    const deadline = performance.now() + 120_000;
    let backlog = Number.POSITIVE_INFINITY;
    while (backlog > 0 && performance.now() < deadline) {
      backlog = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.events WHERE state IN ('received', 'processing')`)).rows[0]!.n;
      if (backlog > 0) await sleep(500);
    }
    const { rows: present } = await db.query<{ event_id: string; state: string }>(`SELECT event_id, state FROM oncehook.events`);
    const states = new Map(present.map((r) => [r.event_id, r.state]));
    const outcomes = [...simulator.outcomes.values()];
    const acknowledged = outcomes.filter((o) => o.acknowledged);
    let done = 0;
    let notDone = 0;
    const { rows: remaining } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.events`);
    for (const outcome of acknowledged) {
      const state = states.get(storedIdOf(outcome.event));
      // Deleted by retention: it was done (retention deletes only done events).
      if (state === 'done' || state === undefined) done += 1;
      else notDone += 1;
    }
    if (notDone > 0) violations.push(`${notDone} acknowledged events are not done after the load stopped`);
    const stats = sandbox.stats();
    for (const service of ['email', 'fulfilment'] as const) {
      const twice = Object.values(stats[service].appliedByKey).filter((n) => n > 1).length;
      if (twice > 0) violations.push(`${service}: ${twice} keys applied more than once`);
    }
    for (const service of services) {
      if (service.proc.exitCode !== null) violations.push(`${service.kind} ${service.pid} exited (${service.proc.exitCode})`);
    }

    const verdicts = verdictsOf(samples, options);
    if (verdicts.length === 0) violations.push(`only ${samples.length} samples: too few to judge (a longer run, or a shorter --sample-seconds)`);
    for (const v of verdicts)
      if (!v.flat) violations.push(`${v.measure} grows: ${(v.change * 100).toFixed(1)}% of its mean over the judged span (band ${(options.band * 100).toFixed(0)}%)`);

    const report: SoakReport = {
      options: {
        minutes: options.minutes,
        rate: options.rate,
        sampleSeconds: options.sampleSeconds,
        ageAfterSeconds: options.ageAfterSeconds,
        band: options.band,
        outDir: options.outDir,
      },
      samples,
      verdicts,
      events: { sent, acknowledged: acknowledged.length, done, notDone },
      violations,
    };
    log(`  ${remaining[0]!.n} event rows at the end (the rest deleted by retention)`);
    await mkdir(options.outDir, { recursive: true });
    await writeFile(path.join(options.outDir, 'soak.json'), JSON.stringify(report, null, 2));
    await writeFile(path.join(options.outDir, 'soak.svg'), plot(samples, verdicts, `soak ${run}: ${options.minutes} min at ${options.rate} events/s`));
    return report;
  } finally {
    await Promise.all(services.map((s) => s.kill9()));
    redisClient.disconnect();
    await db.end().catch(() => {});
    await sandbox.close();
    await redis.kill9();
    await postgres.destroy();
  }
}

export function formatSoak(report: SoakReport): string {
  const e = report.events;
  return [
    `events: ${e.sent} sent, ${e.acknowledged} acknowledged, ${e.done} done (or done and then removed by retention), ${e.notDone} not done`,
    ...report.verdicts.map((v) => `${v.measure}: mean ${v.mean.toFixed(1)}, trend ${(v.change * 100).toFixed(1)}% over the judged span: ${v.flat ? 'flat' : 'GROWING'}`),
    `wrote ${path.join(report.options.outDir, 'soak.json')} and soak.svg`,
    report.violations.length === 0 ? 'verdict: flat, nothing lost' : `VIOLATIONS (${report.violations.length}):\n  ${report.violations.join('\n  ')}`,
  ].join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) {
  const { values } = parseScriptArgs(import.meta.url, {
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '40' },
      'sample-seconds': { type: 'string', default: '60' },
      'age-after-seconds': { type: 'string', default: '120' },
      band: { type: 'string', default: '0.15' },
      out: { type: 'string', default: 'soak-report' },
      /** Judge a finished run's DIR/soak.json again with this code's verdict (and redraw DIR/soak.svg); no load. */
      judge: { type: 'string' },
    },
  });
  if (values.judge !== undefined) {
    const saved = JSON.parse(await readFile(path.join(values.judge, 'soak.json'), 'utf8')) as SoakReport;
    const verdicts = verdictsOf(saved.samples, saved.options);
    await writeFile(path.join(values.judge, 'soak.svg'), plot(saved.samples, verdicts, `soak: ${saved.options.minutes} min at ${saved.options.rate} events/s`));
    for (const v of verdicts)
      process.stdout.write(`${v.measure}: mean ${v.mean.toFixed(1)}, trend ${(v.change * 100).toFixed(1)}% over the judged span: ${v.flat ? 'flat' : 'GROWING'}\n`);
    process.stdout.write(`judged ${saved.samples.length} samples of ${path.join(values.judge, 'soak.json')} again; redrew soak.svg\n`);
    process.exit(verdicts.length > 0 && verdicts.every((v) => v.flat) ? 0 : 1);
  }
  const numbers = {
    minutes: Number(values.minutes),
    rate: Number(values.rate),
    sampleSeconds: Number(values['sample-seconds']),
    ageAfterSeconds: Number(values['age-after-seconds']),
    band: Number(values.band),
  };
  for (const [name, value] of Object.entries(numbers)) {
    if (!Number.isFinite(value) || value <= 0) {
      process.stderr.write(`--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} must be a positive number (got "${value}")\n(--help for more)\n`);
      process.exit(2);
    }
  }
  const report = await runSoak({ ...numbers, outDir: values.out! });
  process.stdout.write(`${formatSoak(report)}\n`);
  process.exit(report.violations.length === 0 ? 0 : 1);
}
