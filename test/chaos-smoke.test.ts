/**
 * The small version of `npm run chaos`, run as the command itself: every fault at least once
 * (workers, ingest and Redis killed, Postgres restarted, sandbox faults, and with
 * `--network-faults` a stall and the other network faults on every link), then the same
 * checks: acknowledged => done, effects exactly once, forged-only events leave no trace. With
 * QUEUE_SHARDS=4: every process routes by event key through the kills and the lost queue.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { expect, it } from 'vitest';
import { TEST_QUEUE_BACKEND, TEST_REDIS_CLUSTER } from './helpers/stack.js';

it('survives the chaos run with zero violations', { timeout: 240_000 }, async () => {
  const reportFile = path.join(tmpdir(), `oncehook-chaos-${randomBytes(4).toString('hex')}.json`);
  const child = spawn(
    process.execPath,
    [
      ...SOURCE_NODE_ARGS,
      'scripts/chaos.ts',
      '--events',
      '150',
      '--workers',
      '2',
      '--concurrency',
      '20',
      '--queue-shards',
      // On a cluster (the redis-cluster project): six shards over its three primaries, a chaos
      // cluster of its own whose primary is killed and whose shard slots move mid-run.
      TEST_REDIS_CLUSTER ? '6' : '4',
      '--queue-backend',
      TEST_QUEUE_BACKEND,
      // Network faults on every process's links (not on a cluster: its nodes announce their own addresses).
      ...(TEST_REDIS_CLUSTER ? ['--redis-cluster'] : ['--network-faults']),
      '--drain-timeout-seconds',
      '120',
      '--report-file',
      reportFile,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  console.log(
    `[figure] chaos smoke\n${output
      .split('\n')
      .filter((l) => !l.startsWith('  '))
      .slice(-9)
      .join('\n')}`,
  );
  // A run that ended without its report (the script itself failed) says why: its exit code and
  // the end of its output, stack included (a busy run once lost exactly that: only the last
  // line of a crash was shown).
  const reportText = await readFile(reportFile, 'utf8').catch(() => null);
  if (reportText === null) throw new Error(`the chaos run exited ${code} without writing its report; its output ends:\n${output.slice(-4000)}`);
  const report = JSON.parse(reportText);
  await rm(reportFile, { force: true });
  expect(report.violations, output.slice(-3000)).toEqual([]);
  expect(code, output.slice(-3000)).toBe(0);
  expect(report.acknowledged).toBe(150);
  // On QUEUE_BACKEND=postgres there is no Redis to kill: the Postgres restart cuts the queue too.
  // On a cluster, a primary is killed (failover) instead, and the slots of its shards move.
  if (TEST_REDIS_CLUSTER) {
    expect(report.kills).toMatchObject({ ingest: 1, redisRestarts: 0, primaryFailovers: 1, postgresRestarts: 1 });
    expect(report.kills.slotsMoved).toBeGreaterThanOrEqual(1);
  } else expect(report.kills).toMatchObject({ ingest: 1, redisRestarts: TEST_QUEUE_BACKEND === 'redis' ? 1 : 0, primaryFailovers: 0, postgresRestarts: 1 });
  expect(report.kills.workers).toBeGreaterThanOrEqual(1);
  // A stall of every link to Postgres and Redis (sockets open, no bytes) and more: every process
  // recovered by itself once it ended (the drain would have failed otherwise).
  if (!TEST_REDIS_CLUSTER) {
    expect(report.network.episodes.stall).toBeGreaterThanOrEqual(1);
    expect(report.network.recoveryAfterStallMs.length).toBe(report.network.episodes.stall);
  }
  // 60 Stripe order payments (receipt + shipment) and 60 renewals (charge); 30 GitHub issues,
  // each fanned out to two handlers (one of them failing the first attempt of a third, and
  // ending with a final external call).
  expect(report.effects).toMatchObject({ charges: 60, emails: 60, shipments: 60, ledgerEntries: 120, fanoutIndex: 30, fanoutNotify: 30, fanoutPinged: 30 });
  // Flow control: a concurrency-2 handler and a handler paused from the start, resumed mid-way.
  expect(report.flow).toMatchObject({ limited: 30, paused: 30 });
  expect(report.flow.limitedMaxInFlight).toBeLessThanOrEqual(2);
  expect(report.flow.waitingAtResume).toBeGreaterThan(0);
  // A destination (docs/destinations.md): the 30 GitHub issue events forwarded to the example
  // TypeScript receiver in its own process, each applied there once.
  expect(report.flow.destination).toBe(30);
  // Forged deliveries are refused (400/401), or cut by the ingest kill; never a 2xx (that would
  // be a violation above).
  expect(report.deliveries.invalidRejected).toBeGreaterThanOrEqual(1);
  // The peak memory of every kind of process was measured (a Node process holds tens of MB at
  // the least; Postgres's shared memory and its backends more than a few MB), Redis's where
  // there is one.
  const kinds = ['ingest', 'worker', 'receiver', 'postgres', ...(TEST_QUEUE_BACKEND === 'redis' ? ['redis'] : [])];
  expect(Object.keys(report.peakMemoryMb).sort()).toEqual(kinds.sort());
  for (const kind of kinds) expect(report.peakMemoryMb[kind], kind).toBeGreaterThan(kind === 'redis' ? 1 : 20);
  expect(report.peakMemoryMb.worker).toBeLessThan(2_000);
});
