/**
 * 100 concurrent deliveries of the same signed event, with two worker processes running:
 * exactly one row, one job processed, one ledger credit, 100 answers of 2xx.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeQueueConnection, queueSchemaFor } from '@oncehook/core';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { killAllServices, spawnService, type Service } from '@oncehook/harness';
import { type IngestHandle, ledgerSummary, q, testEnv, startIngest, testPrefix, testQueueStore, testQueues, T, TEST_QUEUE_BACKEND } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { waitFor } from '@oncehook/harness';

let db: TestDatabase;
let ingest: IngestHandle;
let workers: Service[];
const prefix = testPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix });
  workers = [1, 2].map(() => spawnService('worker', testEnv({ databaseUrl: db.url, prefix })));
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
});
afterAll(async () => {
  await killAllServices();
  await ingest.close();
  await db.drop();
});

it('100 concurrent deliveries of one event -> one row, one job, one credit, 100 x 2xx', async () => {
  const event = paymentSucceeded('evt_concurrent_100', { account: 'cus_conc', amount: 4200 });
  const now = Math.floor(Date.now() / 1000);
  // Each delivery is signed separately, as a provider's retries are (timestamps vary).
  const deliveries = Array.from({ length: 100 }, (_, i) => signStripe(event, { timestamp: now - (i % 5) }));
  const answers = await Promise.all(deliveries.map((d) => deliver(ingest.url, d)));

  const statuses = answers.map((a) => a.status);
  expect(statuses.every((s) => s >= 200 && s < 300)).toBe(true);
  expect(statuses.filter((s) => s === 202)).toHaveLength(1);
  expect(answers.filter((a) => a.json.status === 'duplicate')).toHaveLength(99);

  const row = await waitFor(
    async () => {
      const r = await q.getEventByKey(db.pool, 'stripe', 'evt_concurrent_100');
      return r?.state === 'done' ? r : null;
    },
    { what: 'event done' },
  );
  const runs = await q.getRuns(db.pool, row.id);
  expect(runs.map((r) => ({ handler: r.handler, state: r.state, attempts: r.attempts }))).toEqual([{ handler: 'shop.payments', state: 'done', attempts: 1 }]); // run by a worker exactly once

  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${T.events}`);
  expect(rows[0]).toEqual({ n: 1 });

  const ledger = await ledgerSummary(db.pool);
  expect(ledger.entries).toBe(1);
  expect(ledger.balance).toBe(4200);

  // One job was ever processed. On Redis the queue holds exactly one completed job and nothing
  // else; on Postgres a job is deleted when a worker takes it, so the queue is empty and the
  // table's insert count is one.
  // The job completes just after the run's commit made the event done: wait for the counts to
  // settle (a bound far above normal), then hold them to exactly one processed job.
  const store = testQueueStore(db.url, prefix);
  const queues = testQueues(store, prefix);
  const expected = { completed: TEST_QUEUE_BACKEND === 'redis' ? 1 : 0, failed: 0, wait: 0, active: 0, delayed: 0 };
  let counts: Record<string, number> = {};
  await waitFor(
    async () => {
      // Summed over the shards (six on the redis-cluster project, one elsewhere).
      const perShard = await Promise.all(queues.shards.map((queue) => queue.getJobCounts('completed', 'failed', 'wait', 'active', 'delayed')));
      counts = Object.fromEntries(Object.keys(expected).map((state) => [state, perShard.reduce((sum, shard) => sum + (shard[state] ?? 0), 0)]));
      return counts.active === 0 && counts.wait === 0 && counts.delayed === 0;
    },
    { timeoutMs: 20_000, what: 'the queue settled (no job active or waiting)' },
  );
  await queues.close();
  await closeQueueConnection(store);
  expect(counts).toEqual(expected);
  if (TEST_QUEUE_BACKEND === 'postgres') {
    // The queue table keeps no finished job to count: its insert count says how many jobs were
    // ever added (an enqueue of a waiting id inserts nothing). Postgres publishes a backend's
    // counts within about a second of its transaction: wait for the one, then hold it.
    const inserts = async () => {
      const { rows } = await db.pool.query<{ n: number }>("SELECT coalesce(sum(n_tup_ins), 0)::int AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'ready'", [
        queueSchemaFor(prefix),
      ]);
      return rows[0]!.n;
    };
    await waitFor(async () => (await inserts()) >= 1, { timeoutMs: 10_000, what: 'the insert of the one job published' });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await inserts()).toBe(1);
  }
});
