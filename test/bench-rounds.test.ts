/**
 * `npm run bench -- --e2e-rounds R` combines each pipeline's rounds into one row
 * (scripts/bench/rounds.ts): what the combined figures mean is what the docs compare, so the
 * arithmetic is pinned here, and a bad round count is refused before anything starts.
 */
import { spawnSync } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { describe, expect, it } from 'vitest';
import { combineRounds, ratioSpread, type RoundRow } from '../scripts/bench/rounds.js';

function row(
  seconds: number,
  total: number,
  extra: Partial<RoundRow & { claimToStartP50Ms: number; label: string }> = {},
): RoundRow & { claimToStartP50Ms: number; label: string } {
  return {
    label: 'this checkout',
    events: 1000,
    deliveries: 3000,
    seconds,
    eventsPerSecond: Math.round(1000 / seconds),
    cpuMsPerEvent: { ingest: 1, workers: 2, postgres: total - 3, redis: 0, total },
    perEvent: { transactions: 2.3, rowsWritten: 15 },
    workerRssMb: [100, 120],
    claimToStartP50Ms: 10,
    ...extra,
  };
}

describe('bench rounds', () => {
  it('one row per pipeline: per-event figures averaged, events/s over all rounds, latencies the median round, RSS the largest', () => {
    const combined = combineRounds([
      row(2, 5, { claimToStartP50Ms: 30, workerRssMb: [100, 150] }),
      row(4, 7, { claimToStartP50Ms: 10, perEvent: { transactions: 2.5, rowsWritten: 15 } }),
      row(4, 6, { claimToStartP50Ms: 20, deliveries: 3003 }),
    ]);
    expect(combined.label).toBe('this checkout');
    expect(combined.events).toBe(1000); // a round's events, as each round's row says
    expect(combined.eventsPerSecond).toBe(300); // 3000 events in 10 s, not the mean of 500, 250, 250
    expect(combined.seconds).toBe(3.33);
    expect(combined.deliveries).toBe(3001);
    expect(combined.cpuMsPerEvent).toEqual({ ingest: 1, workers: 2, postgres: 3, redis: 0, total: 6 });
    expect(combined.perEvent).toEqual({ transactions: 2.37, rowsWritten: 15 });
    expect(combined.claimToStartP50Ms).toBe(20);
    expect(combined.workerRssMb).toEqual([100, 150]);
  });

  it('one round is its own row; rounds of different sizes are refused', () => {
    const only = row(2, 5);
    expect(combineRounds([only])).toBe(only);
    expect(() => combineRounds([row(2, 5), row(2, 5, { events: 500 })])).toThrow(/different event counts/);
    expect(() => combineRounds([])).toThrow(/no rounds/);
  });

  it('the spread of a ratio over rounds: min-max of the per-round ratios, nothing for one round', () => {
    expect(ratioSpread([5, 6, 4.5], [5, 4, 5])).toBe('0.90-1.50x');
    expect(ratioSpread([5], [5])).toBe('');
  });

  it('--e2e-rounds takes a whole number from 1: anything else exits 2 with what it takes, before anything runs', () => {
    for (const bad of ['0', '1.5']) {
      const result = spawnSync(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/bench.ts', '--e2e-rounds', bad], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
      expect(result.status).toBe(2);
      expect(result.stderr).toContain(`--e2e-rounds takes a whole number of rounds, 1 or more (got "${bad}")`);
    }
  });
});
