/**
 * The small versions of `npm run bench:claims`, `npm run bench:keys` and `npm run bench:round-trips`, run as the commands
 * themselves: each exits 0, prints its table with a row per size, and drops the database it
 * created. Behaviour only; the figures are for the docs, never asserted.
 */
import { spawn } from 'node:child_process';
import { ROOT, urlFor, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { expect, it } from 'vitest';

function run(script: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...SOURCE_NODE_ARGS, script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('close', (code) => resolve({ code, output }));
  });
}

async function benchDatabases(prefix: string): Promise<string[]> {
  const admin = createPool(urlFor('postgres'), { max: 1 });
  try {
    const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${prefix}%`]);
    return rows.map((row) => row.datname);
  } finally {
    await admin.end();
  }
}

it('bench:claims measures claims at each size, over retained keys, and cleans up', { timeout: 120_000 }, async () => {
  const before = await benchDatabases('oncehook_bench_claims_');
  const { code, output } = await run('scripts/bench-claims.ts', ['--sizes', '0,3000', '--claims', '40']);
  expect(code, output).toBe(0);
  expect(output).toContain('retained keys (pruned rows) in the table');
  expect(output).toMatch(/^\s+0 \| [\d.]+ ms \| [\d.]+ ms \| 1\.00x, 1\.00x \|/m);
  expect(output).toMatch(/^\s+3000 \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+x, [\d.]+x \| [\d.]+ ms \| 1\.00x$/m);
  expect(await benchDatabases('oncehook_bench_claims_')).toEqual(before);
  // A mistyped option fails loudly instead of measuring something else.
  const bad = await run('scripts/bench-claims.ts', ['--rows', 'key']);
  expect(bad.code).toBe(2);
  expect(bad.output).toContain('--rows takes keys or events (got "key")');
});

it('bench:keys prints bytes per event before and after pruning, and cleans up', { timeout: 120_000 }, async () => {
  const before = await benchDatabases('oncehook_bench_keys_');
  const { code, output } = await run('scripts/bench-keys.ts', ['--events', '300']);
  expect(code, output).toBe(0);
  expect(output).toMatch(/^total\s+\|\s+\d+ \|\s+\d+$/m);
  expect(output).toMatch(/Per million events: [\d.]+ GB with payloads, [\d.]+ GB as keys \([\d.]+x less\)/);
  expect(await benchDatabases('oncehook_bench_keys_')).toEqual(before);
});

it('bench:round-trips runs the step transaction three ways, counts their round trips (7, 6, 5), and cleans up', { timeout: 120_000 }, async () => {
  const before = await benchDatabases('oncehook_bench_round_trips_');
  const { code, output } = await run('scripts/bench-round-trips.ts', ['--transactions', '30', '--rounds', '2']);
  expect(code, output).toBe(0);
  expect(output).toMatch(/^separate \|\s+7 \|.*\| +1\.00x \| +1\.00x$/m);
  expect(output).toMatch(/^begin\+ +\|\s+6 \|/m);
  expect(output).toMatch(/^both +\|\s+5 \|/m);
  expect(await benchDatabases('oncehook_bench_round_trips_')).toEqual(before);
  // Its count options refuse 0 through the harness's countArg, tested in script-help.test.ts.
});
