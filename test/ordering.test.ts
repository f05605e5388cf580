/**
 * Ordering helpers of the SDK: ctx.ordered(objectKey, version) keeps an older update from
 * overwriting a newer one whatever order the provider delivers in; ctx.lock(objectKey)
 * serialises local steps about one object. Over real Postgres and Redis, with real workers.
 */
import { deliver, waitFor } from '@oncehook/harness';
import { defineHandler } from '@oncehook/sdk';
import { processJob } from '@oncehook/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { customerUpdated } from './helpers/orders.js';
import { claimStripe, dispatchJob, engine, startIngest, startWorker, T, TRUNCATE_ALL, testPrefix } from './helpers/stack.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(TRUNCATE_ALL);
});

async function stepResult(eventId: string): Promise<unknown> {
  const { rows } = await db.pool.query<{ result: unknown }>(
    `SELECT s.result FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id JOIN ${T.events} e ON e.id = r.event_row_id WHERE e.event_id = $1`,
    [eventId],
  );
  return rows[0]?.result;
}

describe('ctx.ordered', () => {
  it('three customer.updated events delivered newest first, to two workers: the newest profile stays, the older two are recorded as stale', { timeout: 30_000 }, async () => {
    const prefix = testPrefix();
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    const workers = [await startWorker({ databaseUrl: db.url, prefix }), await startWorker({ databaseUrl: db.url, prefix })];
    try {
      const t = Math.floor(Date.now() / 1000);
      // Reverse order: the newest first, each finished before the next arrives.
      for (const [id, created, email] of [
        ['evt_order_3', t, 'third@example.com'],
        ['evt_order_2', t - 60, 'second@example.com'],
        ['evt_order_1', t - 120, 'first@example.com'],
      ] as const) {
        expect((await deliver(ingest.url, customerUpdated(id, created, email))).status).toBe(202);
        await waitFor(async () => (await db.pool.query(`SELECT 1 FROM ${T.events} WHERE event_id = $1 AND state = 'done'`, [id])).rowCount === 1, { what: `${id} done` });
      }
      const profile = await db.pool.query(`SELECT email FROM example_customers WHERE id = 'cus_profile'`);
      expect(profile.rows[0]).toEqual({ email: 'third@example.com' });
      expect(await stepResult('evt_order_3')).toMatchObject({ applied: true });
      expect(await stepResult('evt_order_2')).toMatchObject({ applied: false, reason: 'stale', newer: t * 1000 });
      expect(await stepResult('evt_order_1')).toMatchObject({ applied: false, reason: 'stale', newer: t * 1000 });
      const { rows } = await db.pool.query(`SELECT handler, object_key, version::bigint AS version FROM ${T.versions}`);
      expect(rows).toEqual([{ handler: 'shop.customer-profiles', object_key: 'customer:cus_profile', version: t * 1000 }]);

      // All at once, several times each, in random order: still the newest.
      const t2 = t + 100;
      const deliveries = [1, 2, 3, 4, 5].flatMap((n) => [1, 2, 3].map(() => customerUpdated(`evt_race_${n}`, t2 + n, `race${n}@example.com`)));
      deliveries.sort(() => Math.random() - 0.5);
      await Promise.all(deliveries.map((d) => deliver(ingest.url, d)));
      await waitFor(async () => (await db.pool.query(`SELECT 1 FROM ${T.events} WHERE event_id LIKE 'evt_race_%' AND state = 'done'`)).rowCount === 5, {
        what: 'race events done',
      });
      const after = await db.pool.query(`SELECT email FROM example_customers WHERE id = 'cus_profile'`);
      expect(after.rows[0]).toEqual({ email: 'race5@example.com' });
    } finally {
      for (const worker of workers) await worker.close();
      await ingest.queue.obliterate({ force: true });
      await ingest.close();
    }
  });

  it('rolls back with its step: a step that fails after ctx.ordered leaves no version behind', async () => {
    let attempts = 0;
    const handler = defineHandler({ name: 'test.ordered-rollback', source: 'stripe', type: 'product.updated' }, async (_event, ctx) => {
      await ctx.transaction(
        'apply',
        async () => {
          const { stale } = await ctx.ordered('thing:1', 5);
          attempts += 1;
          if (attempts === 1) throw new Error('write failed after ordered()');
          return { stale };
        },
        { final: true },
      );
    });
    const rowId = await claimStripe(db.pool, 'evt_rollback', 'product.updated');
    expect(await processJob(engine(db.pool, [handler]), dispatchJob(rowId, 'evt_rollback'))).toMatchObject({ runs: [{ kind: 'retry' }] });
    const { rows: none } = await db.pool.query(`SELECT 1 FROM ${T.versions}`);
    expect(none).toEqual([]);
    // The retry is not stale: the failed attempt's version was rolled back with it.
    const { rows } = await db.pool.query<{ id: number }>(`SELECT id FROM ${T.runs}`);
    expect(await processJob(engine(db.pool, [handler]), { ...dispatchJob(rowId, 'evt_rollback'), handler: 'test.ordered-rollback', attempt: 1 })).toMatchObject({
      runs: [{ kind: 'done' }],
    });
    expect(rows).toHaveLength(1);
    expect(await stepResult('evt_rollback')).toEqual({ stale: false });
  });

  it('outside a local step, or with a bad version, fails the run at once with a message that says what to do', async () => {
    const outside = defineHandler({ name: 'test.ordered-outside', source: 'stripe', type: 'price.created' }, async (_event, ctx) => {
      await ctx.ordered('thing:1', 1);
    });
    const badVersion = defineHandler({ name: 'test.ordered-nan', source: 'stripe', type: 'price.updated' }, async (_event, ctx) => {
      await ctx.transaction('apply', async () => (await ctx.ordered('thing:1', new Date('not a date'))).stale);
    });
    const a = await claimStripe(db.pool, 'evt_outside', 'price.created');
    const b = await claimStripe(db.pool, 'evt_nan', 'price.updated');
    const deps = engine(db.pool, [outside, badVersion]);
    expect(await processJob(deps, dispatchJob(a, 'evt_outside'))).toMatchObject({
      runs: [{ kind: 'failed', error: expect.stringMatching(/ctx\.ordered\(\) in handler "test\.ordered-outside" must be called inside a local step/) }],
    });
    expect(await processJob(deps, dispatchJob(b, 'evt_nan'))).toMatchObject({
      runs: [{ kind: 'failed', error: expect.stringMatching(/must be a finite number or a valid Date/) }],
    });
  });
});

describe('ctx.lock', () => {
  it('a second local step locking the same object waits until the first commits', { timeout: 20_000 }, async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked: () => void = () => {};
    const holding = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const order: string[] = [];
    const first = defineHandler({ name: 'test.lock-first', source: 'stripe', type: 'plan.created' }, async (_event, ctx) => {
      await ctx.transaction(
        'hold',
        async () => {
          await ctx.lock('account:42');
          order.push('first locked');
          locked();
          await released;
          order.push('first commits');
          return null;
        },
        { final: true },
      );
    });
    const second = defineHandler({ name: 'test.lock-second', source: 'stripe', type: 'plan.updated' }, async (_event, ctx) => {
      await ctx.transaction(
        'wait',
        async () => {
          await ctx.lock('account:42');
          order.push('second locked');
          return null;
        },
        { final: true },
      );
    });
    const deps = engine(db.pool, [first, second]);
    const a = await claimStripe(db.pool, 'evt_lock_a', 'plan.created');
    const b = await claimStripe(db.pool, 'evt_lock_b', 'plan.updated');
    const running = processJob(deps, dispatchJob(a, 'evt_lock_a'));
    await holding;
    const waiting = processJob(deps, dispatchJob(b, 'evt_lock_b'));
    // The second step is blocked on the advisory lock (Postgres says so), not merely slow.
    await waitFor(async () => (await db.pool.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rowCount === 1, { what: 'a waiting advisory lock' });
    expect(order).toEqual(['first locked']);
    release();
    await Promise.all([running, waiting]);
    expect(order).toEqual(['first locked', 'first commits', 'second locked']);
  });
});
