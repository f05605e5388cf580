/**
 * Losing a dependency, for real, on servers of the test's own:
 * - Redis restarted without persistence while events sit `received` in the queue: the
 *   reconciler re-enqueues them and every one finishes, effects once.
 * - Postgres unreachable: ingest answers 503 with Retry-After and stores nothing; once it is
 *   back, the provider's retry is claimed.
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createPool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';
import { createScratchDatabase } from '@oncehook/harness';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { startOwnPostgres, type OwnPostgres } from '@oncehook/harness';
import { startOwnRedis } from '@oncehook/harness';
import { killAllServices, spawnService } from '@oncehook/harness';
import { ledgerSummary, q, testEnv, startIngest, stateCounts, testPrefix, T } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { waitFor } from '@oncehook/harness';

let db: TestDatabase;
let ownPostgres: OwnPostgres | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
});
// Processes of a failed test never outlive it (they would work on the next test's events).
afterEach(async () => {
  await killAllServices();
});
afterAll(async () => {
  await db.drop();
  await ownPostgres?.destroy();
});

it('Redis restarted empty with events received: the reconciler re-enqueues them, all finish once', async () => {
  const redis = await startOwnRedis();
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix, redisUrl: redis.url });
  const N = 40;
  try {
    for (let i = 0; i < N; i += 1) {
      const res = await deliver(ingest.url, signStripe(paymentSucceeded(`evt_redis_${i}`, { account: `cus_r${i % 4}`, amount: 100 + i })));
      expect(res.status).toBe(202);
    }
    expect(await ingest.queue.count()).toBe(N);

    // Redis dies and comes back with nothing.
    await redis.kill9();
    await redis.start();
    await waitFor(async () => (await ingest.queue.count().catch(() => -1)) === 0, { what: 'ingest reconnected to the empty Redis' });
    expect(await stateCounts(db.pool)).toEqual({ received: N });

    const startedAt = Date.now();
    const workers = [1, 2].map(() => spawnService('worker', testEnv({ databaseUrl: db.url, prefix, redisUrl: redis.url })));
    await waitFor(async () => (await stateCounts(db.pool)).done === N, { timeoutMs: 45_000, what: 'all events done' });
    console.log(`[figure] Redis restart with ${N} events lost from the queue -> all done ${Date.now() - startedAt} ms after 2 workers started (REQUEUE_AFTER_MS=500)`);

    const ledger = await ledgerSummary(db.pool);
    expect(ledger.entries).toBe(N);
    expect([...ledger.perEvent.values()].every((n) => n === 1)).toBe(true);
    expect(ledger.balance).toBe(Array.from({ length: N }, (_, i) => 100 + i).reduce((a, b) => a + b, 0));
    const { rows } = await db.pool.query(`SELECT max(attempts)::int AS max FROM ${T.runs}`);
    expect(rows[0]).toEqual({ max: 1 });

    // Redis dies again under running workers: they reconnect and keep working.
    await redis.kill9();
    await redis.start();
    for (let i = N; i < N + 5; i += 1) {
      const res = await deliver(ingest.url, signStripe(paymentSucceeded(`evt_redis_${i}`, { account: 'cus_r0', amount: 1 })));
      expect(res.status).toBe(202); // even if the enqueue lands on a reconnecting client
    }
    await waitFor(async () => (await stateCounts(db.pool)).done === N + 5, { timeoutMs: 45_000, what: 'events after the second restart done' });
    expect((await ledgerSummary(db.pool)).entries).toBe(N + 5);
    await Promise.all(workers.map((w) => w.stop()));
  } finally {
    await ingest.close();
    await redis.kill9();
  }
});

it('Postgres unreachable: 503 with Retry-After and nothing stored; back up: the retry is claimed', async () => {
  ownPostgres = await startOwnPostgres();
  const database = await createScratchDatabase({ baseUrl: ownPostgres.baseUrl });
  const pool = createPool(database.url, { max: 4, connectionTimeoutMillis: 1_000 });
  await migrate(pool);
  const ingest = await startIngest({ databaseUrl: database.url, prefix: testPrefix() });
  try {
    const delivery = signStripe(paymentSucceeded('evt_pg_down'));
    await ownPostgres.stop('immediate');

    const down = await deliver(ingest.url, delivery);
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('5');
    expect(down.json).toMatchObject({ error: 'unavailable' });
    const ready = await fetch(`${ingest.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ checks: { postgres: 'unavailable', redis: 'ok' } });
    expect(await ingest.queue.count()).toBe(0);

    await ownPostgres.start();
    // The provider retries the same delivery (a fresh signature, as Stripe's retries carry).
    const back = await waitFor(
      async () => {
        const res = await deliver(ingest.url, signStripe(paymentSucceeded('evt_pg_down')));
        return res.status === 202 ? res : null;
      },
      { timeoutMs: 20_000, intervalMs: 250, what: 'claim after Postgres restart' },
    );
    expect(back.json).toMatchObject({ status: 'accepted', eventId: 'evt_pg_down' });
    expect((await q.getEventByKey(pool, 'stripe', 'evt_pg_down'))?.state).toBe('received');
    expect(await ingest.queue.count()).toBe(1);
  } finally {
    await ingest.close();
    await pool.end();
  }
});
