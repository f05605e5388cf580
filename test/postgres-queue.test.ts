/**
 * QUEUE_BACKEND=postgres: Oncehook with Postgres alone. Real processes whose REDIS_URL points
 * at a port where nothing listens (a process that still used Redis would never get a job):
 * deliveries are processed once, the jobs live in BullMQ's tables in the schema
 * `<QUEUE_PREFIX>_queue` of the same database, a repeated delivery adds no second job,
 * readiness names the queue, Bull Board lists the queue and its jobs.
 *
 * The crash tests, the chaos smoke and the queue-facing tests also run whole on this backend
 * (the `postgres-queue` project of vitest.config.ts).
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { deliver, freePort, killAllServices, paymentSucceeded, signStripe, spawnService, waitFor } from '@oncehook/harness';
import { jobIdFor, queueSchemaFor } from '@oncehook/shared';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { ingestUrl, ledgerSummary, onlyRun, testEnv, testPrefix } from './helpers/stack';

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

it('runs with Postgres alone: processed once, jobs in <prefix>_queue, no second job for a duplicate, Bull Board shows them', async () => {
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

  // The jobs are rows of BullMQ's job table in this prefix's schema: one, the event's dispatch
  // job (the only handler ran inside it; a retry would have added a run job).
  const schema = queueSchemaFor(prefix);
  const { rows } = await db.pool.query<{ id: string; state: string }>(`SELECT id, state::text FROM "${schema}".job ORDER BY id`);
  expect(rows).toEqual([{ id: jobIdFor({ provider: 'stripe', eventId: 'evt_pg_only', attempt: 0 }), state: 'completed' }]);

  // Bull Board reads the same tables.
  const board = await fetch(`${url}/admin/queues/api/queues?activeQueue=webhook-events&status=completed&page=1`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(board.status).toBe(200);
  const { queues } = (await board.json()) as { queues: { name: string; counts: Record<string, number>; jobs: { id: string }[] }[] };
  expect(queues.map((queue) => queue.name)).toEqual(['webhook-events']);
  expect(queues[0]!.counts).toMatchObject({ completed: 1, failed: 0, waiting: 0, active: 0 });
  expect(queues[0]!.jobs.map((job) => job.id).sort()).toEqual(rows.map((row) => row.id).sort());
  expect(ingest.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
  expect(worker.lines.join('\n')).not.toMatch(/ECONNREFUSED/);
});
