/**
 * The short version of `npm run bench`: every server and the end-to-end path run under real
 * load and answer correctly. It asserts behaviour, never speed (machines are noisy); the
 * figures are printed for reading.
 */
import { expect, it } from 'vitest';
import { formatBench, runBench } from '../scripts/bench';

it('runs the ingest comparison and the end-to-end measurement', { timeout: 180_000 }, async () => {
  const result = await runBench({ durationSeconds: 1, connections: [10], e2eEvents: 100, workers: [1, 2], log: () => {} });
  console.log(`[figure] bench smoke (1 s runs; use npm run bench for real figures)\n${formatBench(result)}`);
  expect(result.ingest.map((r) => r.server)).toEqual(['naive', 'ceiling', 'oncehook']);
  for (const row of result.ingest) {
    expect(row.requestsPerSecond).toBeGreaterThan(0);
    expect(row.non2xx).toBe(0); // every signed request accepted (new or duplicate)
    expect(row.errors).toBe(0);
  }
  expect(result.e2e.map((r) => r.events)).toEqual([100, 100]);
  expect(result.e2e.every((r) => r.eventsPerSecond > 0)).toBe(true);
});
