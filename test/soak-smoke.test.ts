/**
 * The small version of `npm run soak`: its verdict on series whose answer is known (a leak of
 * 1 KB per event is growing, a flat or shrinking one is not), and the whole soak for 30 seconds
 * (too short for a verdict on the stores: warm-up) with every event acknowledged done once,
 * every measure sampled, and the chart written. docs/reliability.md has the long runs.
 */
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { judge, runSoak } from '../scripts/soak.js';

it('the verdict: a steady leak is growing; a flat, noisy or shrinking measure is not', () => {
  const at = (f: (t: number) => number) => Array.from({ length: 20 }, (_, i) => ({ t: i * 60, v: f(i * 60) }));
  // 40 events/s leaking 1 KB each: +2.3 MB a minute on a 150 MB process.
  expect(
    judge(
      'leak',
      at((t) => 150 + (t / 60) * 2.3),
      0.15,
    ).flat,
  ).toBe(false);
  expect(
    judge(
      'flat',
      at(() => 150),
      0.15,
    ).flat,
  ).toBe(true);
  expect(
    judge(
      'noisy',
      at((t) => 150 + ((t / 60) % 2 === 0 ? 8 : -8)),
      0.15,
    ).flat,
  ).toBe(true);
  expect(
    judge(
      'shrinking',
      at((t) => 200 - t / 60),
      0.15,
    ).flat,
  ).toBe(true);
  // An empty backlog with an event now and then is flat.
  expect(
    judge(
      'backlog',
      at((t) => ((t / 60) % 5 === 0 ? 1 : 0)),
      0.15,
    ).flat,
  ).toBe(true);
});

it('30 seconds of soak: every event done once, every measure sampled, the chart written', { timeout: 180_000 }, async () => {
  const outDir = path.join(tmpdir(), `oncehook-soak-${process.pid}`);
  try {
    const report = await runSoak({ minutes: 0.5, rate: 20, sampleSeconds: 5, ageAfterSeconds: 5, band: 0.15, outDir, log: () => {} });
    expect(report.events.acknowledged).toBe(report.events.sent);
    expect(report.events.notDone).toBe(0);
    expect(report.violations.filter((v) => !v.includes('grows'))).toEqual([]);
    expect(report.samples.length).toBeGreaterThanOrEqual(5);
    for (const sample of report.samples) for (const value of Object.values(sample.values)) expect(Number.isFinite(value)).toBe(true);
    const svg = await readFile(path.join(outDir, 'soak.svg'), 'utf8');
    expect(svg.match(/<polyline/g)).toHaveLength(8);
    console.log(
      `[figure] soak smoke: ${report.events.sent} events in 30 s, ${report.samples.length} samples; ${report.verdicts.map((v) => `${v.measure} ${(v.change * 100).toFixed(0)}%`).join(', ')}`,
    );
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
});
