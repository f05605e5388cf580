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
import { judge, runSoak, verdictsOf } from '../scripts/soak.js';

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
  // The 30-minute run's backlog (0-14 waiting at 40 events/s, a spike late in the span): work in
  // flight against a floor of one second of load (verdictsOf); against a floor of 1 it read as growing.
  const lateSpike = at((t) => (t === 17 * 60 ? 14 : 2));
  expect(judge('backlog', lateSpike, 0.15, 40).flat).toBe(true);
  expect(judge('backlog', lateSpike, 0.15, 1).flat).toBe(false);
  // A backlog that gains 1 event a second is a queue that does not keep up, whatever the floor.
  expect(
    judge(
      'backlog',
      at((t) => t),
      0.15,
      40,
    ).flat,
  ).toBe(false);
  const measures = ['rss.ingest', 'rss.worker1', 'rss.worker2', 'redis.used_memory', 'postgres.events', 'postgres.runs_steps_attempts', 'postgres.deliveries'];
  const samples = Array.from({ length: 30 }, (_, i) => ({
    t: i * 60,
    values: { ...Object.fromEntries(measures.map((m) => [m, 150])), 'backlog.events': i === 28 ? 14 : 2 },
  }));
  expect(verdictsOf(samples, { band: 0.15, rate: 40 }).find((v) => v.measure === 'backlog.events')?.flat).toBe(true);
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
