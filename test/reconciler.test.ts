/**
 * The reconciler's pass, called directly (runOnce) and asserted on its counts.
 */
import { REDIS_URL, startOwnRedis } from '@oncehook/harness';
import { createWorkerMetrics, DEFAULT_SCHEMA } from '@oncehook/shared';
import { advisoryLockKey, createEventQueue, createRedis, jobIdFor, createReconciler } from '@oncehook/core';
import type { EventQueue } from '@oncehook/core';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { q, seedRun, T, testLog, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let redis: Redis;
let queue: EventQueue;
const settings = { intervalMs: 1_000, requeueAfterMs: 1_000, batchSize: 100 };

beforeAll(async () => {
  db = await createTestDatabase();
  redis = createRedis(REDIS_URL, 'producer');
  queue = createEventQueue(redis, testPrefix());
});
afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
  await queue.obliterate({ force: true });
});

async function insert(eventId: string): Promise<number> {
  const r = await q.claimEvent(db.pool, { source: 'stripe', kind: 'stripe', eventId, type: 't', signedAt: null, rawBody: '{}', payload: {}, meta: {} });
  if (r.outcome !== 'new') throw new Error('expected new');
  return r.rowId;
}

const reconciler = () => createReconciler({ pool: db.pool, queries: q, queue, log: testLog, settings });

it('re-enqueues the dispatch of received events past the threshold once per threshold, and leaves fresh ones alone', async () => {
  const stale = await insert('evt_stale');
  await insert('evt_fresh');
  await db.pool.query(`UPDATE ${T.events} SET updated_at = now() - interval '5 seconds' WHERE id = $1`, [stale]);
  const pass = reconciler();

  expect(await pass.runOnce()).toEqual({ leader: true, reclaimed: 0, requeued: 1, enqueueFailed: 0 });
  expect((await queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_stale', attempt: 0 })))?.data).toEqual({
    rowId: stale,
    source: 'stripe',
    eventId: 'evt_stale',
    kind: 'stripe',
    type: 't',
    attempt: 0,
  });
  expect(await queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_fresh', attempt: 0 }))).toBeUndefined();
  // Touched: not re-enqueued again on the next pass.
  expect(await pass.runOnce()).toMatchObject({ requeued: 0 });
});

it('re-enqueues received runs past the threshold (their retry job was lost)', async () => {
  const rowId = await insert('evt_run_lost');
  await seedRun(db.pool, rowId, { handler: 'h1', state: 'received', attempts: 2 });
  await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() - interval '5 seconds'`);
  expect(await reconciler().runOnce()).toEqual({ leader: true, reclaimed: 0, requeued: 1, enqueueFailed: 0 });
  expect((await queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_run_lost', handler: 'h1', attempt: 2 })))?.data).toEqual({
    rowId,
    source: 'stripe',
    eventId: 'evt_run_lost',
    handler: 'h1',
    generation: 0,
    attempt: 2,
  });
});

it('releases expired leases (fencing the old holder) and enqueues the next attempt', async () => {
  const rowId = await insert('evt_expired');
  const oldToken = '00000000-0000-4000-8000-00000000000a';
  const runId = await seedRun(db.pool, rowId, { handler: 'h1', state: 'processing', attempts: 1, leaseToken: oldToken, leaseMs: 1 });
  await new Promise((resolve) => setTimeout(resolve, 20));

  expect(await reconciler().runOnce()).toEqual({ leader: true, reclaimed: 1, requeued: 0, enqueueFailed: 0 });
  const [run] = await q.getRuns(db.pool, rowId);
  expect(run).toMatchObject({ id: runId, state: 'received', leaseToken: null, attempts: 1 });
  expect(run?.lastError).toMatch(/lease expired during attempt 1/);
  expect(await q.markRunDone(db.pool, runId, oldToken)).toBe(false); // fenced out
  expect((await q.getEvent(db.pool, rowId))?.state).toBe('processing'); // still pending
  expect(await queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_expired', handler: 'h1', attempt: 1 }))).toBeDefined();
});

it('runs one leader at a time: a pass that cannot take the lock does nothing', async () => {
  const stale = await insert('evt_leader');
  await db.pool.query(`UPDATE ${T.events} SET updated_at = now() - interval '5 seconds' WHERE id = $1`, [stale]);
  const holder = await db.pool.connect();
  try {
    // Another process's pass in progress.
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryLockKey(DEFAULT_SCHEMA, 'reconciler')]);
    const pass = reconciler();
    expect(await pass.runOnce()).toEqual({ leader: false, reclaimed: 0, requeued: 0, enqueueFailed: 0 });
    await holder.query('COMMIT');
    expect(await pass.runOnce()).toMatchObject({ leader: true, requeued: 1 });
  } finally {
    holder.release();
  }
});

it('a Redis that stops answering (SIGSTOP, connections open) does not stop the reconciler: the pass gives up after its timeout, a later one enqueues', async () => {
  const own = await startOwnRedis();
  const client = createRedis(own.url, 'producer');
  const silentQueue = createEventQueue(client, testPrefix());
  try {
    await silentQueue.getJobCounts('waiting'); // connected and ready
    const rows = [await insert('evt_silent_a'), await insert('evt_silent_b'), await insert('evt_silent_c')];
    const age = () => db.pool.query(`UPDATE ${T.events} SET updated_at = now() - interval '5 seconds' WHERE id = ANY($1)`, [rows]);
    await age();
    // With the gauges (queue counts from Redis) as in a worker.
    const pass = createReconciler({
      pool: db.pool,
      queries: q,
      queue: silentQueue,
      log: testLog,
      settings,
      metrics: createWorkerMetrics({ defaultMetrics: false }),
      redisTimeoutMs: 300,
    });
    own.pause();
    // Without the bound this never resolves (the test's timeout): commands to a silent server
    // wait forever. The first add times out; the other two are not tried; the gauges give up.
    expect(await pass.runOnce()).toEqual({ leader: true, reclaimed: 0, requeued: 3, enqueueFailed: 3 });
    own.resume();
    await age();
    expect(await pass.runOnce()).toEqual({ leader: true, reclaimed: 0, requeued: 3, enqueueFailed: 0 });
    for (const eventId of ['evt_silent_a', 'evt_silent_b', 'evt_silent_c']) expect(await silentQueue.getJob(jobIdFor({ source: 'stripe', eventId, attempt: 0 }))).toBeDefined();
  } finally {
    own.resume();
    await silentQueue.close();
    client.disconnect();
    await own.kill9();
  }
});
