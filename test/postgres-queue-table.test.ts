/**
 * The queue table of QUEUE_BACKEND=postgres (packages/core/src/postgres-queue.ts), on the real
 * Postgres: an enqueue of a waiting job is a no-op; jobs are taken best priority first, then
 * oldest, a lifo job ahead of its priority, a delayed one not before it is due; two workers
 * taking at once never take the same job, and a row held by another's take is skipped; a job
 * whose processor threw runs again later, a dead letter does not; an idle worker wakes on the
 * enqueue's notification, and listens again after its listening connection is cut; close waits
 * for the jobs in flight; counts stop at their cap; a claim statement inserts its new events'
 * jobs itself (insert on claim), routed to their shards, and notifies each shard once.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '@oncehook/harness';
import { UnrecoverableError } from 'bullmq';
import {
  claimJobsFor,
  closeQueueConnection,
  createEventQueues,
  type EventJobData,
  openQueueConnection,
  type PostgresJob,
  openPostgresQueueStore,
  closePostgresQueueStore,
  PostgresEventQueue,
  PostgresQueueWorker,
  QUEUE_COUNT_CAP,
  QUEUE_JOB_ATTEMPTS,
  type QueueConnection,
  queueSchemaFor,
  jobIdFor,
  shardOf,
} from '@oncehook/core';
import type { VerifiedEvent } from '@oncehook/shared';
import type pg from 'pg';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { q, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let connection: Extract<QueueConnection, { backend: 'postgres' }>;
let prefix: string;

beforeAll(async () => {
  db = await createTestDatabase();
  prefix = testPrefix();
  const opened = openQueueConnection({ QUEUE_BACKEND: 'postgres', REDIS_URL: 'redis://127.0.0.1:9', DATABASE_URL: db.url, QUEUE_PREFIX: prefix }, 'worker', { poolSize: 8 });
  if (opened.backend !== 'postgres') throw new Error('expected the postgres queue');
  connection = opened;
});
afterAll(async () => {
  await closeQueueConnection(connection);
  await db.drop();
});

let queues = 0;
/** A queue of this test's own (a name of its own in the shared table). */
function freshQueue(): PostgresEventQueue {
  queues += 1;
  return new PostgresEventQueue(connection.store, `q${queues}`);
}

const job = (n: number): EventJobData => ({ rowId: n, source: 'stripe', eventId: `evt_${n}`, attempt: 0 });

function worker(queue: PostgresEventQueue, processor: (job: PostgresJob) => Promise<unknown>, options: { concurrency?: number; idlePollMs?: number; retryDelayMs?: number } = {}) {
  return new PostgresQueueWorker(connection.store, queue.name, processor, {
    concurrency: options.concurrency ?? 1,
    idlePollMs: options.idlePollMs ?? 200,
    retryDelayMs: options.retryDelayMs ?? 20,
  });
}

it('an enqueue of a job that waits is a no-op; once taken, the same id can be enqueued again', async () => {
  const queue = freshQueue();
  await queue.add('event', job(1), { jobId: 'a' });
  await queue.add('event', job(99), { jobId: 'a' });
  await queue.addBulk([
    { name: 'event', data: job(2), opts: { jobId: 'a' } },
    { name: 'event', data: job(3), opts: { jobId: 'b' } },
  ]);
  expect(await queue.count()).toBe(2);
  expect((await queue.getJob('a'))?.data).toEqual(job(1));

  const seen: number[] = [];
  const w = worker(queue, async (taken) => seen.push(taken.data.rowId));
  await waitFor(async () => seen.length === 2, { what: 'both jobs taken' });
  expect(seen.sort()).toEqual([1, 3]);
  expect(await queue.count()).toBe(0);
  await queue.add('event', job(4), { jobId: 'a' });
  await waitFor(async () => seen.length === 3, { what: 'the id taken again' });
  await w.close();
  const schema = queueSchemaFor(prefix);
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM "${schema}".ready WHERE queue = $1`, [queue.name])).rows[0].n).toBe(0);
});

it('takes the best priority first, then the oldest; a lifo job goes ahead of its priority; a delayed job waits until it is due', async () => {
  const queue = freshQueue();
  await queue.add('event', job(1), { jobId: 'p2-old', priority: 2 });
  await queue.add('event', job(2), { jobId: 'none-old' });
  await queue.add('event', job(3), { jobId: 'p1', priority: 1 });
  await queue.add('event', job(4), { jobId: 'none-new' });
  await queue.add('event', job(5), { jobId: 'p2-lifo', priority: 2, lifo: true });
  await queue.add('event', job(6), { jobId: 'delayed', delay: 1_500 });
  expect(await queue.getJobCounts('waiting', 'delayed', 'active')).toEqual({ waiting: 5, delayed: 1, active: 0 });
  expect(await (await queue.getJob('delayed'))?.getState()).toBe('delayed');
  expect((await queue.getJob('p2-lifo'))?.opts).toEqual({ priority: 2, lifo: true });
  // The page's order is the take's order.
  expect((await queue.nextJobs(10)).map((j) => j.id)).toEqual(['none-old', 'none-new', 'p1', 'p2-lifo', 'p2-old', 'delayed']);
  // As BullMQ answers getJobs: by when they were added (the reconciler's oldest-waiting gauge).
  expect((await queue.getJobs(['waiting'], 0, 0, true)).map((j) => j.id)).toEqual(['p2-old']);
  expect((await queue.getJobs(['waiting', 'delayed'], 0, 0)).map((j) => j.id)).toEqual(['delayed']);

  const order: { id: string; at: number }[] = [];
  const started = Date.now();
  const w = worker(queue, async (taken) => order.push({ id: taken.id, at: Date.now() - started }));
  await waitFor(async () => order.length === 6, { timeoutMs: 10_000, what: 'all six taken' });
  await w.close();
  expect(order.map((o) => o.id)).toEqual(['none-old', 'none-new', 'p1', 'p2-lifo', 'p2-old', 'delayed']);
  expect(order[5]!.at).toBeGreaterThanOrEqual(1_000); // taken once due, not before
});

it('two workers taking at once from one backlog never take the same job, and take all of it', async () => {
  const queue = freshQueue();
  const total = 400;
  for (let i = 0; i < total; i += 100) {
    await queue.addBulk(Array.from({ length: 100 }, (_, k) => ({ name: 'event', data: job(i + k), opts: { jobId: `j${i + k}` } })));
  }
  const taken = new Map<string, number>();
  const byWorker = [0, 0];
  // Each job holds its slot a moment, so the two workers' takes overlap all through the drain.
  const processor = (w: number) => async (j: PostgresJob) => {
    taken.set(j.id, (taken.get(j.id) ?? 0) + 1);
    byWorker[w]! += 1;
    await new Promise((resolve) => setTimeout(resolve, 2));
  };
  const workers = [worker(queue, processor(0), { concurrency: 8 }), worker(queue, processor(1), { concurrency: 8 })];
  await waitFor(async () => taken.size === total, { timeoutMs: 30_000, what: 'the backlog drained' });
  await Promise.all(workers.map((w) => w.close()));
  expect([...taken.values()].every((n) => n === 1)).toBe(true);
  expect(byWorker[0]! + byWorker[1]!).toBe(total);
  // Both took part (not one draining while the other waited on its locks).
  expect(Math.min(...byWorker)).toBeGreaterThan(total / 10);
});

it("a row another worker's take holds is skipped, not waited for: the rest is taken while it is held, the row itself after", async () => {
  const queue = freshQueue();
  await queue.addBulk(['held', 'free-1', 'free-2'].map((id, i) => ({ name: 'event', data: job(i), opts: { jobId: id } })));
  // Another worker mid-take: its statement holds the first row's lock (a transaction held open
  // here, where a take's lasts a moment; the interleaving forced, not hoped for).
  const other = await db.pool.connect();
  const seen: string[] = [];
  try {
    await other.query('BEGIN');
    await other.query(`SELECT id FROM "${queueSchemaFor(prefix)}".ready WHERE id = 'held' FOR UPDATE`);
    const w = worker(queue, async (j) => seen.push(j.id), { concurrency: 4 });
    await waitFor(async () => seen.length === 2, { timeoutMs: 5_000, what: 'the two free rows taken while the first is held' });
    expect(seen.sort()).toEqual(['free-1', 'free-2']);
    await other.query('ROLLBACK');
    await waitFor(async () => seen.length === 3, { timeoutMs: 5_000, what: 'the held row taken once released' });
    await w.close();
  } finally {
    await other.query('ROLLBACK').catch(() => {});
    other.release();
  }
  expect(seen).toContain('held');
});

it('a job whose processor threw runs again, later, as the next attempt; a dead letter and a job out of attempts are dropped', async () => {
  const queue = freshQueue();
  const attempts = new Map<string, number[]>();
  const failed: string[] = [];
  const w = worker(queue, async (j) => {
    attempts.set(j.id, [...(attempts.get(j.id) ?? []), j.attemptsMade]);
    if (j.id === 'flaky' && j.attemptsMade < 2) throw new Error('connection refused');
    if (j.id === 'dead') throw new UnrecoverableError('dead letter: handler failed');
    if (j.id === 'broken') throw new Error('always');
  });
  w.on('failed', (j: PostgresJob) => failed.push(j.id));
  await queue.addBulk(['flaky', 'dead', 'broken'].map((id, i) => ({ name: 'event', data: job(i), opts: { jobId: id } })));
  await waitFor(async () => failed.length === 2 && (attempts.get('flaky')?.length ?? 0) === 3, { timeoutMs: 15_000, what: 'the retries and the drops' });
  await w.close();
  expect(attempts.get('flaky')).toEqual([0, 1, 2]);
  expect(attempts.get('dead')).toEqual([0]);
  expect(attempts.get('broken')).toEqual(Array.from({ length: QUEUE_JOB_ATTEMPTS }, (_, i) => i));
  expect(failed.sort()).toEqual(['broken', 'dead']);
  expect(await queue.count()).toBe(0);
});

it("an idle worker wakes on the enqueue's notification, not its poll", async () => {
  const queue = freshQueue();
  const seen: string[] = [];
  // A poll far longer than the test: only the notification can wake it.
  const w = worker(queue, async (j) => seen.push(j.id), { idlePollMs: 120_000 });
  await w.waitUntilReady();
  await new Promise((resolve) => setTimeout(resolve, 300)); // idle: asleep in its wait
  await queue.add('event', job(1), { jobId: 'first' });
  await waitFor(async () => seen.length === 1, { timeoutMs: 5_000, what: 'the notified job taken' });

  await queue.add('event', job(2), { jobId: 'second' });
  await waitFor(async () => seen.length === 2, { timeoutMs: 5_000, what: 'the next notified job taken' });
  await w.close();
  expect(seen).toEqual(['first', 'second']);
});

it('a listening connection cut (a Postgres restart, a proxy timeout) is opened again at the next poll; the worker lives and notifications reach it again', async () => {
  const queue = freshQueue();
  const seen: string[] = [];
  const w = worker(queue, async (j) => seen.push(j.id), { idlePollMs: 500 });
  await w.waitUntilReady();
  const listener = (w as unknown as { listener: pg.Client & { processID: number } }).listener;
  await db.pool.query('SELECT pg_terminate_backend($1)', [listener.processID]);
  // The next poll listens again on a new connection.
  await waitFor(
    async () => {
      const now = (w as unknown as { listener?: pg.Client }).listener;
      return now !== undefined && now !== listener;
    },
    { timeoutMs: 5_000, what: 'a new listening connection' },
  );
  await queue.add('event', job(1), { jobId: 'after-reconnect' });
  await waitFor(async () => seen.length === 1, { timeoutMs: 5_000, what: 'the job taken' });
  await w.close();
});

it('close waits for the jobs in flight and takes no more', async () => {
  const queue = freshQueue();
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const done: string[] = [];
  const w = worker(queue, async (j) => {
    await gate;
    done.push(j.id);
  });
  await queue.add('event', job(1), { jobId: 'in-flight' });
  await waitFor(async () => (await queue.count()) === 0, { what: 'the job taken' });
  const closing = w.close();
  await queue.add('event', job(2), { jobId: 'after-close' });
  release();
  await closing;
  expect(done).toEqual(['in-flight']);
  expect(await queue.count()).toBe(1);
});

it("the jobs page's read is bounded by the page, not the backlog: with 20,000 jobs waiting, the next 50 are read through the take's index (each statement the page sends reads under 500 rows, by EXPLAIN ANALYZE)", async () => {
  const queue = freshQueue();
  await queue.waitUntilReady();
  const schema = queueSchemaFor(prefix);
  // A backlog: most due (some with a priority), every seventh delayed.
  await db.pool.query(
    `INSERT INTO "${schema}".ready (id, queue, data, priority, ord, run_at)
     SELECT $1 || '-' || g, $1, '{}'::jsonb, CASE WHEN g % 10 = 0 THEN 2 ELSE 0 END, g, now() + CASE WHEN g % 7 = 0 THEN interval '1 hour' ELSE interval '0' END
       FROM generate_series(1, 20000) g`,
    [queue.name],
  );
  await db.pool.query(`ANALYZE "${schema}".ready`);
  const sent: { text: string; values: unknown[] }[] = [];
  const recording = {
    query: (text: string, values: unknown[]) => {
      sent.push({ text, values });
      return connection.store.pool.query(text, values);
    },
  } as unknown as pg.Pool;
  const next = await queue.through(recording).nextJobs(50);
  // Due jobs first, in the take's order: priority 0 before 2, then oldest (ord).
  expect(next.map((j) => j.id).slice(0, 3)).toEqual([`${queue.name}-1`, `${queue.name}-2`, `${queue.name}-3`]);
  expect(next).toHaveLength(50);
  type PlanNode = { 'Node Type': string; 'Actual Rows': number; 'Actual Loops': number; Plans?: PlanNode[] };
  const rowsRead = (node: PlanNode): number =>
    (node['Node Type'].includes('Scan') ? node['Actual Rows'] * node['Actual Loops'] : 0) + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child), 0);
  expect(sent.length).toBeGreaterThan(0);
  for (const statement of sent) {
    const { rows } = await db.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`, statement.values);
    expect(rowsRead(rows[0]!['QUERY PLAN'][0].Plan), statement.text).toBeLessThan(500);
  }
  await queue.obliterate();
});

it('counts stop at QUEUE_COUNT_CAP: a gauge refresh or the jobs page is a bounded read under any backlog', async () => {
  const queue = freshQueue();
  await queue.add('event', job(1), { jobId: 'first' });
  await db.pool.query(
    `INSERT INTO "${queueSchemaFor(prefix)}".ready (id, queue, data, ord, run_at)
     SELECT 'bulk-' || g, $1, '{}'::jsonb, g, now() FROM generate_series(1, $2::int) g`,
    [queue.name, QUEUE_COUNT_CAP + 10],
  );
  expect(await queue.count()).toBe(QUEUE_COUNT_CAP);
  expect(await queue.getJobCounts('waiting', 'delayed')).toEqual({ waiting: QUEUE_COUNT_CAP, delayed: 0 });
  await queue.obliterate();
  expect(await queue.count()).toBe(0);
});

it("insert on claim: a batch's claim statement inserts a dispatch job for each event it created (none for a duplicate), on the event's shard, with the row id in its data, and notifies each shard that got one, once", async () => {
  const shards = createEventQueues(connection, prefix, 3);
  const event = (eventId: string): VerifiedEvent => ({
    source: 'stripe',
    kind: 'stripe',
    eventId,
    type: 'payment_intent.succeeded',
    signedAt: null,
    rawBody: '{}',
    payload: {},
    meta: {},
  });
  const events = Array.from({ length: 12 }, (_, i) => event(`evt_claim_jobs_${i}`));
  const dispatchOf = (e: VerifiedEvent) => ({ source: e.source, eventId: e.eventId, kind: e.kind, type: e.type, attempt: 0 });
  const listener = await connection.store.pool.connect();
  const heard: string[] = [];
  listener.on('notification', (message) => heard.push(message.payload ?? ''));
  try {
    await listener.query(`LISTEN "${connection.store.channel}"`);
    // Two events claimed before: the batch finds them (duplicates) and adds no job for them.
    await q.claimEvents(db.pool, events.slice(0, 2));
    const jobs = await claimJobsFor(shards, () => events.map(dispatchOf));
    expect(jobs).toBeDefined();
    const results = await q.claimEvents(db.pool, events, { jobs });
    expect(results.map((r) => r.outcome)).toEqual([...Array(2).fill('duplicate'), ...Array(10).fill('new')]);

    const { rows } = await db.pool.query<{ id: string; queue: string; data: EventJobData }>(
      `SELECT id, queue, data FROM "${queueSchemaFor(prefix)}".ready WHERE data->>'eventId' LIKE 'evt_claim_jobs_%' ORDER BY ord`,
    );
    const expected = events.slice(2).map((e, i) => {
      const rowId = (results[i + 2] as { rowId: number }).rowId;
      return { id: jobIdFor(dispatchOf(e)), queue: shards.shards[shardOf(e, 3)]!.name, data: { rowId, ...dispatchOf(e) } };
    });
    // In the batch's order (its enqueue clock), each on its event's shard.
    expect(rows).toEqual(expected);
    // One notification per shard that got a job, delivered at the statement's commit.
    await waitFor(async () => heard.length >= new Set(expected.map((e) => e.queue)).size, { timeoutMs: 5_000, what: 'the notifications' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard.sort()).toEqual([...new Set(expected.map((e) => e.queue))].sort());

    // The same batch again: every event a duplicate, no job added, no notification.
    heard.length = 0;
    const again = await q.claimEvents(db.pool, events, { jobs: await claimJobsFor(shards, () => events.map(dispatchOf)) });
    expect(again.every((r) => r.outcome === 'duplicate')).toBe(true);
    const { rows: after } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${queueSchemaFor(prefix)}".ready WHERE data->>'eventId' LIKE 'evt_claim_jobs_%'`);
    expect(after[0]?.n).toBe(10);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(heard).toEqual([]);
  } finally {
    await listener.query('UNLISTEN *');
    listener.release();
    for (const shard of shards.shards) await shard.obliterate();
  }
});

it("insert on claim falls back to the relay when the queue's table cannot be made ready (Postgres unreachable at the first claim): no jobs for the statement, the batch's jobs go through the relay after the commit", async () => {
  // A store whose database does not answer (a closed port): its table cannot be created.
  const unreachable = openPostgresQueueStore('postgres://127.0.0.1:9/none', queueSchemaFor(prefix), { poolSize: 1, applicationName: 'test-unreachable' });
  try {
    const queue = new PostgresEventQueue(unreachable, 'webhook-events');
    expect(await claimJobsFor(queue, () => [{ source: 'stripe', eventId: 'evt_unready', attempt: 0 }])).toBeUndefined();
  } finally {
    await closePostgresQueueStore(unreachable);
  }
  // And on Redis there is nothing to insert on claim.
  expect(
    await claimJobsFor({ name: 'webhook-events' } as never, () => {
      throw new Error('not called on Redis');
    }),
  ).toBeUndefined();
});
