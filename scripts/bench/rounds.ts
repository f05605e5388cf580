/**
 * Several end-to-end rounds of one pipeline as one row, and what the rounds say together.
 *
 * One end-to-end run on this machine moves by 10-50% from the next (docs/benchmarks.md), so
 * `npm run bench -- --e2e-rounds R` runs every pipeline R times, alternating them (Oncehook,
 * then each peer, then Oncehook again ...), and reports each pipeline's rounds combined, with
 * the spread of the per-round ratios beside the combined one.
 */

/** What the combined figures are made of: a row of measureEndToEnd or measurePeer. */
export interface RoundRow {
  events: number;
  deliveries: number;
  seconds: number;
  eventsPerSecond: number;
  cpuMsPerEvent: Record<'ingest' | 'workers' | 'postgres' | 'redis' | 'total', number>;
  perEvent: Record<string, number>;
  workerRssMb: number[];
}

const round2 = (n: number) => Number(n.toFixed(2));
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** The mean of each numeric field of `records` (every round has the same event count, so a mean per event is the total's). */
function meanOf<K extends string>(records: Record<K, number>[]): Record<K, number> {
  const keys = Object.keys(records[0]!) as K[];
  return Object.fromEntries(keys.map((k) => [k, round2(records.reduce((n, r) => n + r[k], 0) / records.length)])) as Record<K, number>;
}

/**
 * The rounds of one pipeline as one row: per-event figures (CPU, statements, rows, WAL, Redis
 * commands) averaged; events/s over all rounds' events and time; latency fields (`...Ms`) the
 * median round's; each worker's RSS its largest; the rest (label, pids, costs) the first
 * round's. Rounds must have run the same number of events (they do: one --e2e-events).
 */
export function combineRounds<T extends RoundRow>(rows: T[]): T {
  if (rows.length === 0) throw new Error('combineRounds: no rounds');
  if (rows.length === 1) return rows[0]!;
  const first = rows[0]!;
  if (rows.some((r) => r.events !== first.events)) throw new Error('combineRounds: rounds with different event counts');
  const events = rows.reduce((n, r) => n + r.events, 0);
  const seconds = rows.reduce((n, r) => n + r.seconds, 0);
  const latencies = Object.fromEntries(
    Object.keys(first)
      .filter((k) => k.endsWith('Ms') && typeof (first as Record<string, unknown>)[k] === 'number')
      .map((k) => [k, median(rows.map((r) => (r as unknown as Record<string, number>)[k]!))]),
  );
  return {
    ...first,
    ...latencies,
    deliveries: Math.round(rows.reduce((n, r) => n + r.deliveries, 0) / rows.length),
    seconds: round2(seconds / rows.length),
    eventsPerSecond: Math.round(events / seconds),
    cpuMsPerEvent: meanOf(rows.map((r) => r.cpuMsPerEvent)),
    perEvent: meanOf(rows.map((r) => r.perEvent)),
    workerRssMb: first.workerRssMb.map((_, i) => Math.max(...rows.map((r) => r.workerRssMb[i] ?? 0))),
  };
}

/** `a / b` for each round (same index = same round), as `min-max`; `''` with one round. */
export function ratioSpread(a: number[], b: number[]): string {
  if (a.length < 2 || a.length !== b.length) return '';
  const ratios = a.map((x, i) => x / b[i]!);
  return `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}x`;
}
