/**
 * The short versions of `npm run bench:backlog` and `npm run bench:peer-faults`, run as the
 * commands themselves: each finishes and prints its table. Behaviour only, never speed; the
 * peer's crash outcome is printed, not asserted (it depends on where the kill lands).
 */
import { spawn } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { expect, it } from 'vitest';

function runScript(file: string, args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...SOURCE_NODE_ARGS, file, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}

it('bench:backlog and bench:peer-faults run end to end and print their tables', { timeout: 180_000 }, async () => {
  const [backlog, faults] = await Promise.all([
    runScript('scripts/bench-backlog.ts', ['--sizes', '100', '--variant', 'flow']),
    runScript('scripts/bench-peer-faults.ts', ['--events', '20', '--wait', '2', '--pipelines', 'bullmq']),
  ]);
  console.log(`[figure] bench scripts smoke (tiny sizes; use the commands for real figures)\n${backlog.output.trim()}\n${faults.output.trim()}`);
  expect(backlog.code, backlog.output.slice(-2000)).toBe(0);
  // side | backlog | Redis bytes | ingest RSS | worker RSS ready, peak, end | drain s | events/s | CPU ms/event: worker, Postgres, Redis | round trips, statements | transactions
  const row = /\nthis checkout +\| +100 \| +\d+ \| +\d+ \| +\d+, \d+, \d+ \| +[\d.]+ \| +\d+ \| ([\d.]+), ([\d.]+), ([\d.]+) \| ([\d.]+), ([\d.]+) \| ([\d.]+)\n/.exec(
    backlog.output,
  );
  expect(row, backlog.output).not.toBeNull();
  // A drain costs the worker and the database CPU: a column stuck at 0 read nothing.
  expect(Number(row![1])).toBeGreaterThan(0);
  expect(Number(row![2])).toBeGreaterThan(0);
  // The flow variant's second handler ran (its gate, waits and wake-ups, its external step and
  // final local step): the top-up alone drains in about 5 round trips per event.
  expect(Number(row![4])).toBeGreaterThan(8);
  expect(Number(row![5])).toBeGreaterThanOrEqual(Number(row![4]));
  expect(Number(row![6])).toBeGreaterThan(1); // the dispatch, the gate's, the local step's
  // Its limited handler's slots, read from its 100 runs: shares, never speed.
  const flow = /\nthis checkout +\| 100 runs \| mean run [\d.]+ ms lease to done \| slots held a run (\d+)% of the time \| share of capacity \(calls\) (\d+)%\n/.exec(
    backlog.output,
  );
  expect(flow, backlog.output).not.toBeNull();
  expect(Number(flow![2])).toBeGreaterThan(0);
  expect(Number(flow![2])).toBeLessThanOrEqual(Number(flow![1]));
  expect(Number(flow![1])).toBeLessThanOrEqual(100);
  expect(faults.code, faults.output.slice(-2000)).toBe(0);
  expect(faults.output).toMatch(/BullMQ alone +\| +\d+ \| +\d+ \|/);
});
