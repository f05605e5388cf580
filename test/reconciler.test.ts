/**
 * The reconciler's pass, called directly (runOnce) and asserted on its counts.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createEventQueue, createRedis, jobIdFor, queries, type EventJobData } from '@oncehook/shared';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { createReconciler } from '../apps/worker/src/reconciler';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { REDIS_URL } from './helpers/db-urls';
import { testLog, testPrefix } from './helpers/stack';

let db: TestDatabase;
let redis: Redis;
let queue: Queue<EventJobData>;
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
  await db.pool.query('TRUNCATE webhook_events CASCADE');
  await queue.obliterate({ force: true });
});

async function insert(eventId: string): Promise<number> {
  const r = await queries.claimEvent(db.pool, { provider: 'stripe', kind: 'stripe', eventId, type: 't', signedAt: null, rawBody: '{}', payload: {}, meta: {} });
  if (r.outcome !== 'new') throw new Error('expected new');
  return r.rowId;
}

it('re-enqueues received rows past the threshold once per threshold, and leaves fresh ones alone', async () => {
  const stale = await insert('evt_stale');
  await insert('evt_fresh');
  await db.pool.query(`UPDATE webhook_events SET updated_at = now() - interval '5 seconds' WHERE id = $1`, [stale]);
  const reconciler = createReconciler({ pool: db.pool, queue, log: testLog, settings });

  expect(await reconciler.runOnce()).toEqual({ leader: true, reclaimed: 0, requeued: 1, enqueueFailed: 0 });
  expect((await queue.getJob(jobIdFor('stripe', 'evt_stale', 0)))?.data).toEqual({ rowId: stale, provider: 'stripe', eventId: 'evt_stale', attempt: 0 });
  expect(await queue.getJob(jobIdFor('stripe', 'evt_fresh', 0))).toBeUndefined();
  // Touched: not re-enqueued again on the next pass.
  expect(await reconciler.runOnce()).toMatchObject({ requeued: 0 });
});

it('releases expired leases (fencing the old holder) and enqueues the next attempt', async () => {
  const rowId = await insert('evt_expired');
  const oldToken = '00000000-0000-4000-8000-00000000000a';
  await queries.acquireLease(db.pool, rowId, oldToken, 1);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const reconciler = createReconciler({ pool: db.pool, queue, log: testLog, settings });

  expect(await reconciler.runOnce()).toEqual({ leader: true, reclaimed: 1, requeued: 0, enqueueFailed: 0 });
  const row = await queries.getEvent(db.pool, rowId);
  expect(row).toMatchObject({ state: 'received', leaseToken: null, attempts: 1 });
  expect(row?.lastError).toMatch(/lease expired during attempt 1/);
  expect(await queries.markDone(db.pool, rowId, oldToken)).toBe(false); // fenced out
  expect(await queue.getJob(jobIdFor('stripe', 'evt_expired', 1))).toBeDefined();
});

it('runs one leader at a time: a pass that cannot take the lock does nothing', async () => {
  const stale = await insert('evt_leader');
  await db.pool.query(`UPDATE webhook_events SET updated_at = now() - interval '5 seconds' WHERE id = $1`, [stale]);
  const holder = await db.pool.connect();
  try {
    // Another process's pass in progress.
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock(7245002)');
    const reconciler = createReconciler({ pool: db.pool, queue, log: testLog, settings });
    expect(await reconciler.runOnce()).toEqual({ leader: false, reclaimed: 0, requeued: 0, enqueueFailed: 0 });
    await holder.query('COMMIT');
    expect(await reconciler.runOnce()).toMatchObject({ leader: true, requeued: 1 });
  } finally {
    holder.release();
  }
});
