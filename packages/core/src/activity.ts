/**
 * Activity by minute, for the console's pictures (migrations/0013, docs/operating.md
 * "Activity"). Nothing on the hot path: each process already counts its deliveries and run
 * attempts in its Prometheus counters; a flusher reads them every ACTIVITY_FLUSH_MS and writes
 * the change since its last read into the current minute, one statement for all of it. Several
 * processes add up in the same rows. The reconciler's leader adds the backlog it samples each
 * pass and deletes minutes older than ACTIVITY_KEEP_HOURS.
 */
import type { IngestMetrics, Logger, Pool, WorkerMetrics } from '@oncehook/shared';
import type { ActivitySample, Queries } from './store/queries.js';

export type { ActivitySample } from './store/queries.js';

/** How long minutes are kept (the console shows the last hour and the last day). */
export const ACTIVITY_KEEP_HOURS = 48;

/** A process's deliveries by source and result, from webhook_events_total (every type summed). */
export async function deliveryReadings(eventsTotal: IngestMetrics['eventsTotal']): Promise<ActivitySample[]> {
  const sums = new Map<string, ActivitySample>();
  for (const v of (await eventsTotal.get()).values) {
    const name = String(v.labels.source ?? '');
    const result = String(v.labels.result ?? '');
    const key = `${name}\n${result}`;
    const sample = sums.get(key) ?? { kind: 'delivery' as const, name, result, count: 0 };
    sample.count += v.value;
    sums.set(key, sample);
  }
  return [...sums.values()];
}

/** A process's run attempts by handler and outcome, with their latency buckets, from webhook_processing_duration_seconds. */
export async function runReadings(duration: WorkerMetrics['processingDuration']): Promise<ActivitySample[]> {
  const byRun = new Map<string, { sample: ActivitySample; byBound: Map<number, number> }>();
  for (const v of (await duration.get()).values) {
    const name = String(v.labels.handler ?? '');
    const result = String(v.labels.outcome ?? '');
    const key = `${name}\n${result}`;
    const entry = byRun.get(key) ?? { sample: { kind: 'run' as const, name, result, count: 0 }, byBound: new Map<number, number>() };
    byRun.set(key, entry);
    if (v.metricName?.endsWith('_count')) entry.sample.count += v.value;
    if (v.metricName?.endsWith('_bucket')) {
      const le = (v.labels as { le?: string | number }).le;
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      entry.byBound.set(bound, (entry.byBound.get(bound) ?? 0) + v.value);
    }
  }
  return [...byRun.values()].map(({ sample, byBound }) => {
    const cumulative = [...byBound.entries()].sort((a, b) => a[0] - b[0]).map(([, n]) => n);
    // Per bucket, not cumulative: bucket i holds the attempts between bound i-1 and bound i.
    return { ...sample, buckets: cumulative.map((n, i) => n - (i === 0 ? 0 : cumulative[i - 1]!)) };
  });
}

export interface ActivityFlusher {
  /** Writes what changed since the last flush (tests call it; the loop calls it every intervalMs). */
  flushOnce(): Promise<void>;
  start(): void;
  /** Stops the loop and writes what is left. */
  stop(): Promise<void>;
}

/** Writes the change of `read()`'s cumulative readings into the current minute, every `intervalMs`. */
export function createActivityFlusher(deps: { pool: Pool; queries: Queries; log: Logger; intervalMs: number; read: () => Promise<ActivitySample[]> }): ActivityFlusher {
  const last = new Map<string, ActivitySample>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  async function flushOnce(): Promise<void> {
    const deltas: ActivitySample[] = [];
    const readings = await deps.read();
    for (const now of readings) {
      const key = `${now.kind}\n${now.name}\n${now.result}`;
      const before = last.get(key);
      // A counter only grows; smaller means the process's registry was reset: all of it is new.
      const reset = before === undefined || now.count < before.count;
      const count = reset ? now.count : now.count - before.count;
      if (count <= 0) continue;
      const buckets = now.buckets?.map((n, i) => (reset ? n : n - (before.buckets?.[i] ?? 0)));
      deltas.push({ ...now, count, buckets });
    }
    if (deltas.length > 0) await deps.queries.addActivity(deps.pool, deltas);
    // Remembered only once written: a failed write is retried with the next flush's deltas.
    for (const now of readings) last.set(`${now.kind}\n${now.name}\n${now.result}`, now);
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      running = flushOnce()
        .catch((error: unknown) => deps.log.warn({ err: error }, 'activity not written; the next flush carries it'))
        .finally(schedule);
    }, deps.intervalMs);
    timer.unref();
  }

  return {
    flushOnce,
    start: schedule,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
      await flushOnce().catch((error: unknown) => deps.log.warn({ err: error }, 'last activity not written'));
    },
  };
}

/** The leader's sample of the backlog (each pass) and its pruning of old minutes. */
export async function sampleBacklog(pool: Pool, queries: Queries): Promise<void> {
  const [backlog, waiting] = await Promise.all([queries.backlog(pool), queries.waitingCounts(pool)]);
  const samples: ActivitySample[] = [
    { kind: 'backlog', name: '', result: 'received', count: backlog.received },
    { kind: 'backlog', name: '', result: 'processing', count: backlog.processing },
    { kind: 'backlog', name: '', result: 'oldest_received_s', count: backlog.oldestReceivedSeconds },
  ];
  const byReason = new Map<string, number>();
  for (const w of waiting) {
    samples.push({ kind: 'backlog', name: w.handler, result: `waiting:${w.waiting}`, count: w.n });
    byReason.set(w.waiting, (byReason.get(w.waiting) ?? 0) + w.n);
  }
  for (const reason of ['paused', 'concurrency', 'rate-limit']) samples.push({ kind: 'backlog', name: '', result: `waiting:${reason}`, count: byReason.get(reason) ?? 0 });
  await queries.addActivity(pool, samples);
  await queries.pruneActivity(pool, ACTIVITY_KEEP_HOURS);
}
