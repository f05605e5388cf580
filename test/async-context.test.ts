/**
 * The engine keeps out of AsyncLocalStorage on a worker's path: on Node 20 the first `run()` of
 * any AsyncLocalStorage turns on an async hook for every promise of the process, which cost a
 * worker 13% of its CPU per event (docs/benchmarks.md). Checked in a process of its own (module
 * state is per process, and this suite's worker processes run the testkit's checks, which turn
 * step tracking on): a handler with a local step using ctx.lock and an external step runs with
 * no `run()` at all; after `trackCurrentStep()` (the testkit) `currentStep()` answers inside each.
 */
import { spawn } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

function probe(): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...SOURCE_NODE_ARGS, 'test/helpers/async-context-probe.ts', db.url], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, output })));
}

it('a run with a local step (ctx.lock inside it) and an external step enters no AsyncLocalStorage; after trackCurrentStep() currentStep() names each step', async () => {
  const { code, output } = await probe();
  expect(code, output).toBe(0);
  const result = JSON.parse(output.trim().split('\n').pop() ?? '{}') as Record<'asWorker' | 'tracked', { runs: number; outcome: string; seen: (string | null)[] }>;
  expect(result.asWorker).toEqual({ runs: 0, outcome: 'done', seen: [null, null] });
  expect(result.tracked.outcome).toBe('done');
  expect(result.tracked.seen).toEqual(['apply', 'notify']);
  expect(result.tracked.runs).toBeGreaterThan(0);
});
