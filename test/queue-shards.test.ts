/**
 * QUEUE_SHARDS: events spread over N queues by a hash of the event key, each queue name its
 * own Redis Cluster hash tag; every process routes an event's jobs to the same shard; workers
 * consume all shards or a configured subset; Bull Board shows every shard. Over real Redis and
 * Postgres (one Redis: the hash tags matter on a cluster, the routing everywhere). The chaos
 * smoke runs with 4 shards too.
 */
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { ConfigError } from '@oncehook/sdk';
import { eventQueueNames, shardOf } from '@oncehook/core';
import { loadWorkerConfig } from 'oncehook';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ledgerSummary, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';

describe('routing', () => {
  it('one shard keeps the historical queue name; several are each a hash tag of their own', () => {
    expect(eventQueueNames(1)).toEqual(['webhook-events']);
    expect(eventQueueNames(4)).toEqual(['{webhook-events-0}', '{webhook-events-1}', '{webhook-events-2}', '{webhook-events-3}']);
  });

  it('an event always maps to the same shard, and keys spread evenly', () => {
    const counts = [0, 0, 0, 0];
    for (let n = 0; n < 20_000; n += 1) {
      const shard = shardOf({ source: 'stripe', eventId: `evt_${n}` }, 4);
      expect(shardOf({ source: 'stripe', eventId: `evt_${n}` }, 4)).toBe(shard);
      counts[shard]! += 1;
    }
    for (const count of counts) expect(count / 20_000).toBeGreaterThan(0.23);
    expect(shardOf({ source: 'stripe', eventId: 'evt_1' }, 1)).toBe(0);
  });

  it('a worker asked for a shard that does not exist refuses to start, naming both settings', () => {
    expect(() => loadWorkerConfig({ QUEUE_SHARDS: '2', WORKER_QUEUE_SHARDS: '1,2' })).toThrow(/WORKER_QUEUE_SHARDS: shard 2 does not exist: QUEUE_SHARDS=2 has shards 0 to 1/);
    expect(() => loadWorkerConfig({ WORKER_QUEUE_SHARDS: 'first' })).toThrow(ConfigError);
  });
});

describe('four shards, two workers with two shards each', () => {
  let db: TestDatabase;
  const prefix = testPrefix();
  const env = { QUEUE_SHARDS: '4', ADMIN_TOKEN: 'shards-admin-token-0123456789' };

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db.drop();
  });

  it('every event is done once, each worker ran only its shards, and Bull Board lists all four', { timeout: 60_000 }, async () => {
    const ingest = await startIngest({ databaseUrl: db.url, prefix, env });
    const low = await startWorker({ databaseUrl: db.url, prefix, env: { ...env, WORKER_QUEUE_SHARDS: '0,1' } });
    const high = await startWorker({ databaseUrl: db.url, prefix, env: { ...env, WORKER_QUEUE_SHARDS: '2,3' } });
    try {
      const ids = Array.from({ length: 80 }, (_, n) => `evt_shard_${n}`);
      // Each delivered twice (the duplicate is answered 200 and adds nothing).
      for (const id of [...ids, ...ids]) {
        const res = await deliver(ingest.url, signStripe(paymentSucceeded(id, { account: 'acct_shards', amount: 1 })));
        expect([200, 202]).toContain(res.status);
      }
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE state = 'done'`);
          return rows[0]?.n === ids.length;
        },
        { timeoutMs: 30_000, what: 'every event done' },
      );
      expect((await ledgerSummary(db.pool)).entries).toBe(ids.length);

      // Each event's job sits in the queue its key maps to, and was completed by the worker of
      // that shard. A job completes just after its run's commit: wait until every one has.
      await waitFor(
        async () => {
          let completed = 0;
          for (const queue of ingest.queues.shards) completed += (await queue.getJobCounts('completed')).completed ?? 0;
          return completed === ids.length;
        },
        { timeoutMs: 20_000, what: 'every job completed' },
      );
      const byQueue = new Map<string, string[]>();
      for (const [index, queue] of ingest.queues.shards.entries()) {
        const jobs = await queue.getJobs(['completed'], 0, -1);
        byQueue.set(
          queue.name,
          jobs.map((job) => job.data.eventId),
        );
        for (const job of jobs) expect(shardOf(job.data, 4)).toBe(index);
      }
      expect([...byQueue.keys()]).toEqual(eventQueueNames(4));
      expect([...byQueue.values()].flat().sort()).toEqual([...ids].sort());
      expect([...byQueue.values()].every((list) => list.length > 0)).toBe(true);
      const ranBy = (worker: typeof low) => worker.eventWorker.workers.map((w) => w.name);
      expect(ranBy(low)).toEqual(['{webhook-events-0}', '{webhook-events-1}']);
      expect(ranBy(high)).toEqual(['{webhook-events-2}', '{webhook-events-3}']);

      const board = await fetch(`${ingest.url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } });
      expect(board.status).toBe(200);
      const { queues } = (await board.json()) as { queues: { name: string }[] };
      expect(queues.map((queue) => queue.name).sort()).toEqual(eventQueueNames(4));
    } finally {
      await low.close();
      await high.close();
      for (const queue of ingest.queues.shards) await queue.obliterate({ force: true });
      await ingest.close();
    }
  });
});
