/**
 * QUEUE_BACKEND=postgres: Oncehook with Postgres alone. Real processes whose REDIS_URL points
 * at a port where nothing listens (a process that still used Redis would never get a job):
 * deliveries are processed once, the jobs are rows of `<QUEUE_PREFIX>_queue.ready` in the same
 * database while they wait (a new event's job written by its claim's own statement), a repeated delivery adds no job, readiness names the queue, the
 * admin's jobs page lists the waiting jobs (through the admin's own pool), and an upgrade from
 * BullMQ's Postgres backend loses nothing. The queue table's own behaviour (order, delays,
 * two workers at once, retries, notifications): test/postgres-queue-table.test.ts.
 *
 * The crash tests, the chaos smoke and the queue-facing tests also run whole on this backend
 * (the `postgres-queue` project of vitest.config.ts).
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { deliver, freePort, killAllServices, paymentSucceeded, signStripe, spawnService, waitFor } from '@oncehook/harness';
import { jobIdFor, queueSchemaFor } from '@oncehook/core';
import { createPostgresBackend, Queue } from 'bullmq';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, ingestUrl, ledgerSummary, onlyRun, testEnv, testPrefix } from './helpers/stack.js';

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

it('runs with Postgres alone: processed once, a duplicate is a duplicate, jobs are rows of <prefix>_queue.ready that the jobs page lists', async () => {
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

  // The jobs are rows of the queue's table in this prefix's schema, deleted when a worker takes
  // them, so the table is empty once the event is done...
  const schema = queueSchemaFor(prefix);
  const jobs = async () => (await db.pool.query<{ id: string; queue: string }>(`SELECT id, queue FROM "${schema}".ready ORDER BY id`)).rows;
  expect(await jobs()).toEqual([]);
  // ...and a job waiting there is a row: a delivery while no worker runs.
  await worker.stop();
  expect((await deliver(url, signStripe(paymentSucceeded('evt_pg_waiting')))).status).toBe(202);
  const waiting = { id: jobIdFor({ source: 'stripe', eventId: 'evt_pg_waiting', attempt: 0 }), queue: 'webhook-events' };
  // Insert on claim: the claim's statement wrote it, so it is there when the delivery is answered.
  expect(await jobs()).toEqual([waiting]);

  // The admin's jobs page reads the same table (Bull Board is Redis's).
  const board = await fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(board.status).toBe(200);
  const text = await board.text();
  expect(text).toContain('<h2>webhook-events</h2><p>1 waiting, 0 delayed</p>');
  expect(text).toContain(`<code>${waiting.id}</code>`);
  expect(text).toContain('<code>stripe/evt_pg_waiting</code>');
  expect(ingest.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
  expect(worker.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
});

it("the jobs page reads through the admin's own pool and budget: with the queue's table locked it answers 503 within the admin's lock timeout, and a delivery is answered once the lock goes, its job committed with it; its reads never run on ingest's queue connections", async () => {
  const prefix = testPrefix();
  const env = testEnv({ databaseUrl: db.url, prefix, redisUrl: `redis://127.0.0.1:${await freePort()}`, extra: { QUEUE_BACKEND: 'postgres', ADMIN_TOKEN: TOKEN } });
  const ingest = spawnService('ingest', env);
  const url = await ingestUrl(ingest);
  const page = () => fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect((await page()).status).toBe(200);
  // Its statements ran on the admin's connections (their last statement is the page's read) and
  // on none of the queue's.
  const { rows: backends } = await db.pool.query<{ app: string }>(
    `SELECT application_name AS app FROM pg_stat_activity WHERE datname = current_database() AND (query LIKE '%delayed ORDER BY run_at%' OR query LIKE '%run_at <= now() ORDER BY priority, ord LIMIT $2') AND pid <> pg_backend_pid()`,
  );
  expect(backends.map((b) => b.app)).toContain('oncehook-admin');
  expect(backends.map((b) => b.app)).not.toContain('oncehook-queue-producer');

  // The table locked (a long migration, an operator's VACUUM FULL): the page gives up at the
  // admin's lock timeout, naming why. A delivery meanwhile waits for the lock: its claim inserts
  // its job in the same statement (insert on claim), so the queue's table is on the claim's path,
  // as the events table is; it is answered once the lock goes (or 503 at CLAIM_TIMEOUT_MS, which
  // a provider retries), its job committed with it.
  const holder = await db.pool.connect();
  let delivered: ReturnType<typeof deliver> | undefined;
  try {
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE "${queueSchemaFor(prefix)}".ready IN ACCESS EXCLUSIVE MODE`);
    const started = Date.now();
    delivered = deliver(url, signStripe(paymentSucceeded('evt_pg_locked')));
    const locked = await page();
    expect(locked.status).toBe(503);
    expect(await locked.json()).toMatchObject({ error: 'admin_busy' });
    expect(Date.now() - started).toBeLessThan(8_000); // the lock timeout (2 s), not the holder's transaction
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
  expect((await delivered!).status).toBe(202);
  const jobs = async () => (await db.pool.query<{ id: string }>(`SELECT id FROM "${queueSchemaFor(prefix)}".ready`)).rows.map((r) => r.id);
  expect(await jobs()).toContain(jobIdFor({ source: 'stripe', eventId: 'evt_pg_locked', attempt: 0 }));
});

it("upgrading from BullMQ's Postgres backend: a job left waiting in BullMQ's tables is not read, and its event still finishes once (the reconciler); BullMQ's tables are left alone beside the new one", async () => {
  const prefix = testPrefix();
  const schema = queueSchemaFor(prefix);
  const eventId = 'evt_pg_upgrade';
  const rowId = await claimStripe(db.pool, eventId, 'payment_intent.succeeded', paymentSucceeded(eventId, { account: 'cus_upgrade', amount: 300 }));
  // The release before: its dispatch job waits in BullMQ's own job table, in the same schema.
  const old = new Queue('webhook-events', { connection: { connectionString: db.url, schema, migrate: true, max: 2 } }, createPostgresBackend);
  try {
    await old.add('event', dispatchJob(rowId, eventId), { jobId: jobIdFor(dispatchJob(rowId, eventId)) });
    expect(await old.getJobCounts('waiting')).toEqual({ waiting: 1 });
  } finally {
    await old.close();
  }
  // This release starts on that database.
  const env = testEnv({
    databaseUrl: db.url,
    prefix,
    redisUrl: `redis://127.0.0.1:${await freePort()}`,
    extra: { QUEUE_BACKEND: 'postgres', REQUEUE_AFTER_MS: '500', RECONCILE_INTERVAL_MS: '200' },
  });
  const worker = spawnService('worker', env);
  await worker.waitFor(/worker ready/);
  await waitFor(async () => (await onlyRun(db.pool, 'stripe', eventId).catch(() => null))?.event.state === 'done', {
    timeoutMs: 20_000,
    what: `${eventId} done through the reconciler`,
  });
  expect((await ledgerSummary(db.pool)).perEvent.get(eventId)).toBe(1);
  const { rows } = await db.pool.query<{ job: number; ready: number }>(
    `SELECT (SELECT count(*)::int FROM "${schema}".job) AS job, (SELECT count(*)::int FROM "${schema}".ready) AS ready`,
  );
  expect(rows[0]).toEqual({ job: 1, ready: 0 });
});
