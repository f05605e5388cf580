/**
 * QUEUE_BACKEND=postgres: Oncehook with Postgres alone. Real processes whose REDIS_URL points
 * at a port where nothing listens (a process that still used Redis would never get a job):
 * deliveries are processed once, the jobs live in BullMQ's tables in the schema
 * `<QUEUE_PREFIX>_queue` of the same database and a completed one is deleted at once, a
 * repeated delivery adds no job, readiness names the queue, Bull Board lists the queue and its
 * waiting jobs.
 *
 * The crash tests, the chaos smoke and the queue-facing tests also run whole on this backend
 * (the `postgres-queue` project of vitest.config.ts).
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { deliver, freePort, killAllServices, paymentSucceeded, signStripe, spawnService, waitFor } from '@oncehook/harness';
import { closeQueueConnection, createEventQueue, jobIdFor, openQueueConnection, queueSchemaFor } from '@oncehook/core';
import type pg from 'pg';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ingestUrl, ledgerSummary, onlyRun, testEnv, testPrefix } from './helpers/stack.js';

const TOKEN = 'admin-token-0123456789abcdef';
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await killAllServices();
});
afterAll(async () => {
  await db.drop();
});

it('runs with Postgres alone: processed once, a duplicate is a duplicate, jobs are rows of <prefix>_queue that Bull Board lists', async () => {
  const prefix = testPrefix();
  const env = testEnv({
    databaseUrl: db.url,
    prefix,
    // Nothing listens there.
    redisUrl: `redis://127.0.0.1:${await freePort()}`,
    extra: { QUEUE_BACKEND: 'postgres', ADMIN_TOKEN: TOKEN },
  });
  const ingest = spawnService('ingest', env);
  const url = await ingestUrl(ingest);
  const worker = spawnService('worker', env);
  await worker.waitFor(/worker ready/);

  const ready = await fetch(`${url}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', queue: 'ok' } });

  const body = signStripe(paymentSucceeded('evt_pg_only', { account: 'cus_pg', amount: 700 }));
  expect((await deliver(url, body)).status).toBe(202);
  await waitFor(async () => (await onlyRun(db.pool, 'stripe', 'evt_pg_only').catch(() => null))?.event.state === 'done', { what: 'evt_pg_only done' });
  // A redelivery of the finished event: a duplicate; no job is added for it.
  expect((await deliver(url, body)).status).toBe(200);
  expect(await ledgerSummary(db.pool)).toMatchObject({ entries: 1, balance: 700 });

  // The jobs are rows of BullMQ's job table in this prefix's schema. A completed job is deleted
  // at once on this backend (POSTGRES_EVENT_JOB_OPTIONS: its count retention deadlocks under
  // concurrency), so the table empties once the event is done (the job completes right after
  // the run's commit: wait for it, never read once; with the count retention it never empties)...
  const schema = queueSchemaFor(prefix);
  const jobs = async () => (await db.pool.query<{ id: string; state: string }>(`SELECT id, state::text FROM "${schema}".job ORDER BY id`)).rows;
  await waitFor(async () => (await jobs()).length === 0, { timeoutMs: 20_000, what: `the completed job deleted from "${schema}".job` });
  // ...and a job waiting there is a row: a delivery while no worker runs.
  await worker.stop();
  expect((await deliver(url, signStripe(paymentSucceeded('evt_pg_waiting')))).status).toBe(202);
  const waiting = { id: jobIdFor({ source: 'stripe', eventId: 'evt_pg_waiting', attempt: 0 }), state: 'waiting' };
  await waitFor(async () => JSON.stringify(await jobs()) === JSON.stringify([waiting]), { what: 'the dispatch job of evt_pg_waiting in the job table' });

  // Bull Board reads the same tables.
  const board = await fetch(`${url}/admin/queues/api/queues?activeQueue=webhook-events&status=waiting&page=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(board.status).toBe(200);
  const { queues } = (await board.json()) as { queues: { name: string; counts: Record<string, number>; jobs: { id: string }[] }[] };
  expect(queues.map((queue) => queue.name)).toEqual(['webhook-events']);
  expect(queues[0]!.counts).toMatchObject({ completed: 0, failed: 0, waiting: 1, active: 0 });
  expect(queues[0]!.jobs.map((job) => job.id)).toEqual([waiting.id]);
  expect(ingest.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
  expect(worker.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
});

it("every connection BullMQ's Postgres backend checks out has an error path: a connection lost between two statements fails its next one, and the process lives", async () => {
  const prefix = testPrefix();
  const store = openQueueConnection({ QUEUE_BACKEND: 'postgres', REDIS_URL: 'redis://127.0.0.1:9', DATABASE_URL: db.url, QUEUE_PREFIX: prefix }, 'producer');
  const queue = createEventQueue(store, prefix);
  try {
    await queue.waitUntilReady();
    // The backend's own pool (what a Worker and a Queue query through), as BullMQ builds it.
    const pool = (queue as unknown as { backend: { connection: { pool: pg.Pool } } }).backend.connection.pool;
    const client = await pool.connect();
    // Checked out, between two statements: the pool's own idle listener is gone, and without
    // ours an 'error' here would be an unhandled 'error' event (the process dies).
    expect(client.listenerCount('error')).toBeGreaterThan(0);
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]); // 57P01, as a shutting-down Postgres sends
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release(true);
    expect((await pool.query<{ ok: number }>('SELECT 1 AS ok')).rows).toEqual([{ ok: 1 }]);
  } finally {
    await queue.close();
    await closeQueueConnection(store);
  }
});
