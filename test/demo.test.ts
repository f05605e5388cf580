/**
 * `npm run demo` completes and tells its story (on this machine's Postgres and Redis): every
 * effect once, which events had no handler and why; two demos at the same moment (one with the
 * queue in Postgres, no Redis) each use their own database and queue, and each removes them
 * when it ends.
 */
import { spawn } from 'node:child_process';
import { freePort, REDIS_URL, ROOT, withAdmin, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { createRedis } from '@oncehook/core';
import { expect, it } from 'vitest';

function demo(events: number, env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/demo.ts', '--events', String(events)], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('close', (code) => resolve({ code, output }));
  });
}

it('two demos at once (the second with QUEUE_BACKEND=postgres and no Redis): each completes with every effect applied once, says which events had no handler, and cleans up', {
  timeout: 150_000,
}, async () => {
  const [a, b] = await Promise.all([demo(30), demo(15, { QUEUE_BACKEND: 'postgres', REDIS_URL: `redis://127.0.0.1:${await freePort()}` })]);
  for (const [run, events] of [
    [a, 30],
    [b, 15],
  ] as const) {
    expect(run.code, run.output).toBe(0);
    // One claim per event: a 202, or (on a loaded machine) a claim that committed after a 503 whose retry was the duplicate.
    const fresh = Number(/new \(202\):\s+(\d+)/.exec(run.output)?.[1]);
    const late = Number(/\+ (\d+) claimed while the answer was a retryable error/.exec(run.output)?.[1] ?? 0);
    expect(fresh + late, run.output).toBe(events);
    expect(run.output).toMatch(new RegExp(`Events:\\s+${events} done`));
    expect(run.output).toMatch(/most applied per idempotency key: 1\)/);
    expect(run.output).toMatch(new RegExp(`No handler:\\s+${events / 3} github "issues.opened" events: the example shop registers no handler for them`));
    expect(run.output).toContain('`npm run demo -- --keep` keeps it running');
    expect(run.output).not.toContain('http://'); // no URL printed that is already dead
  }
  expect(a.output).toMatch(/charges \(renewals\): 10\n\s+receipts \(orders\):\s+10\n\s+shipments \(orders\): 10/);

  // What each run created is gone: its database and its Redis keys.
  // The worker role's client queues commands until it is connected and ready: a producer's
  // (no offline queue) fails a command sent before its ready check answered, which a loaded
  // machine made happen here (`npm run test:busy`).
  const redis = createRedis(REDIS_URL, 'worker');
  try {
    for (const run of [a, b]) {
      const [, database, prefix] = /on database (\S+), queue prefix (\S+)\.\.\./.exec(run.output) ?? [];
      expect(database).toMatch(/^oncehook_demo_/);
      const exists = await withAdmin((c) => c.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]));
      expect(exists.rowCount).toBe(0);
      expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    }
  } finally {
    redis.disconnect();
  }
});
