/**
 * Two horizons with the defaults (RETENTION_DAYS 35, KEY_RETENTION_DAYS 400): a Stripe event
 * first delivered 40 days ago, done, its payload since deleted by retention, is redelivered
 * today: a duplicate, not a second run (and not `expired`). Its narrow row cannot run again.
 * The clock is moved in the test (ingest's clock and the row's times); real ingest, Postgres,
 * Redis.
 */
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { createOperations, createRetention } from '@oncehook/core';
import { loadWorkerConfig } from 'oncehook';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { q, startIngest, T, testLog, testPrefix, type IngestHandle } from './helpers/stack.js';

const DAY = 86_400_000;
let db: TestDatabase;
let ingest: IngestHandle;
let clock = Date.now() - 40 * DAY;

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), now: () => new Date(clock) });
});
afterAll(async () => {
  await ingest.queue.obliterate({ force: true });
  await ingest.close();
  await db.drop();
});

it('a Stripe redelivery 40 days after the first delivery is a duplicate with the default horizons', async () => {
  const defaults = loadWorkerConfig({});
  expect([defaults.RETENTION_DAYS, defaults.KEY_RETENTION_DAYS]).toEqual([35, 400]);
  const created = Math.floor(clock / 1000);
  const event = paymentSucceeded('evt_forty_days', { created, amount: 700 });

  // 40 days ago: delivered, claimed, (processed) done.
  expect((await deliver(ingest.url, signStripe(event, { timestamp: created }))).status).toBe(202);
  await db.pool.query(
    `UPDATE ${T.events} SET state = 'done', finished_at = now() - interval '40 days', received_at = now() - interval '40 days' WHERE event_id = 'evt_forty_days'`,
  );

  // Retention with the default policy: past 35 days the payload goes, the key stays.
  const policy = { defaultDays: defaults.RETENTION_DAYS, overrides: defaults.RETENTION_OVERRIDES, keyDays: defaults.KEY_RETENTION_DAYS };
  expect(await createRetention({ pool: db.pool, queries: q, log: testLog, settings: { policy, batchSize: 100, maxBatches: 1 } }).runOnce()).toMatchObject({
    pruned: 1,
    deleted: 0,
  });
  const row = await q.getEventByKey(db.pool, 'stripe', 'evt_forty_days');
  expect(row).toMatchObject({ state: 'done', payload: null });
  expect(row?.prunedAt).toBeInstanceOf(Date);

  // Today: the provider redelivers (a fresh signature, the same event and `created`).
  clock = Date.now();
  const redelivery = await deliver(ingest.url, signStripe(event));
  expect(redelivery).toMatchObject({ status: 200, json: { status: 'duplicate', eventId: 'evt_forty_days' } });
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE event_id = 'evt_forty_days'`);
  expect(rows[0]?.n).toBe(1);

  // What is left is a key: it cannot be replayed or re-driven, and says why.
  const ops = createOperations({ pool: db.pool, queries: q, queue: ingest.queue });
  const replay = await ops.replay(row!.id, { allSteps: true }, 'test', 'again');
  expect(replay).toMatchObject({ ok: false, reason: expect.stringMatching(/retention deleted this event's payload, runs and steps .* only its key is kept/) });
});

it('refuses a key horizon shorter than a payload horizon, naming both', () => {
  expect(() => loadWorkerConfig({ KEY_RETENTION_DAYS: '30' })).toThrow(/KEY_RETENTION_DAYS: is 30 days, shorter than a payload horizon of 35 days/);
  expect(() => loadWorkerConfig({ KEY_RETENTION_DAYS: '100', RETENTION_OVERRIDES: 'github=120' })).toThrow(/shorter than a payload horizon of 120 days/);
  expect(loadWorkerConfig({ KEY_RETENTION_DAYS: '35' }).KEY_RETENTION_DAYS).toBe(35);
});
