/**
 * The small version of `npm run chaos`: every fault at least once (workers, ingest and Redis
 * killed, Postgres restarted, sandbox faults), then the same checks: acknowledged => done,
 * effects exactly once, forged-only events leave no trace.
 */
import { expect, it } from 'vitest';
import { formatReport, runChaos } from '../scripts/chaos';

it('survives the chaos run with zero violations', { timeout: 240_000 }, async () => {
  const lines: string[] = [];
  const report = await runChaos({ events: 150, workers: 2, concurrency: 20, drainTimeoutMs: 120_000, log: (l) => lines.push(l) });
  console.log(`[figure] chaos smoke\n${formatReport(report)}`);
  expect(report.violations).toEqual([]);
  expect(report.acknowledged).toBe(150);
  expect(report.kills).toMatchObject({ ingest: 1, redisRestarts: 1, postgresRestarts: 1 });
  expect(report.kills.workers).toBeGreaterThanOrEqual(1);
  // 60 Stripe order payments (receipt + shipment) and 60 renewals (charge), 30 GitHub (none).
  expect(report.effects).toMatchObject({ charges: 60, emails: 60, shipments: 60, ledgerEntries: 120 });
  // Forged deliveries are refused (400/401), or cut by the ingest kill; never a 2xx (that would
  // be a violation above).
  expect(report.deliveries.invalidRejected).toBeGreaterThanOrEqual(1);
});
