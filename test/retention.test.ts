/**
 * Retention, two horizons: done events past their source's payload horizon (RETENTION_DAYS) lose
 * their payload, runs, steps and delivery log and keep a narrow key row; rows past the key
 * horizon (KEY_RETENTION_DAYS) are deleted; in bounded batches under the reconciler's
 * leadership; failed ones are kept. A redelivery inside the key horizon is a duplicate (also
 * after the payload went); one past it is answered `expired` and not processed.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { DEFAULT_SCHEMA } from '@oncehook/shared';
import { advisoryLockKey, createRetention } from '@oncehook/core';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { createMetricsProbe } from './helpers/metrics.js';
import { type IngestHandle, q, startIngest, testLog, testPrefix, T } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';

let db: TestDatabase;
let ingest: IngestHandle;
const probe = createMetricsProbe();
const policy = { defaultDays: 3, overrides: { shopify: 1 }, keyDays: 5 };

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({
    databaseUrl: db.url,
    prefix: testPrefix(),
    env: { RETENTION_DAYS: '3', RETENTION_OVERRIDES: 'shopify=1', KEY_RETENTION_DAYS: '5' },
    metrics: probe.metrics,
  });
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
});

/** An event received `ageDays` ago, in `state`, with one handler run (unless received) and one step recorded. */
async function aged(provider: string, eventId: string, ageDays: number, state: 'done' | 'failed' | 'received'): Promise<void> {
  const { rows } = await db.pool.query<{ id: number }>(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state, runs_failed, received_at, updated_at, finished_at)
     VALUES ($1, $1, $2, 't', '{}', $3, CASE WHEN $3 = 'failed' THEN 1 ELSE 0 END, now() - $4 * interval '1 day', now() - $4 * interval '1 day', CASE WHEN $3 <> 'received' THEN now() END)
     RETURNING id`,
    [provider, eventId, state, ageDays],
  );
  if (state === 'received') return;
  const run = await db.pool.query<{ id: number }>(`INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, finished_at) VALUES ($1, 'h', $2, 1, now()) RETURNING id`, [
    rows[0]!.id,
    state,
  ]);
  await db.pool.query(`INSERT INTO ${T.steps} (run_id, generation, name, kind, result) VALUES ($1, 0, 's', 'local', '{}')`, [run.rows[0]!.id]);
}

it('prunes done events past their source payload horizon, deletes rows past the key horizon, in batches, keeping failed ones', async () => {
  for (const age of [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]) {
    await aged('stripe', `evt_${age}`, age, 'done');
    await aged('shopify', `wh_${age}`, age, 'done');
  }
  await aged('stripe', 'evt_failed_old', 9, 'failed');
  await aged('stripe', 'evt_stuck_old', 9, 'received');

  const retention = createRetention({ pool: db.pool, queries: q, log: testLog, settings: { policy, batchSize: 2, maxBatches: 10 } });
  const counts = await retention.runOnce();
  // shopify (1 day): 1.5 .. 4.5 pruned, 5.5 deleted; stripe (3 days): 3.5, 4.5 pruned, 5.5 deleted.
  expect(counts).toEqual({ leader: true, pruned: 6, deleted: 2, bySource: { shopify: { pruned: 4, deleted: 1 }, stripe: { pruned: 2, deleted: 1 } } });

  const { rows } = await db.pool.query<{ key: string; pruned: boolean; payload: unknown }>(
    `SELECT provider || '/' || event_id AS key, pruned_at IS NOT NULL AS pruned, payload FROM ${T.events} ORDER BY provider, event_id`,
  );
  expect(rows.map((r) => `${r.key}${r.pruned ? ' (key only)' : ''}`)).toEqual([
    'shopify/wh_0.5',
    'shopify/wh_1.5 (key only)',
    'shopify/wh_2.5 (key only)',
    'shopify/wh_3.5 (key only)',
    'shopify/wh_4.5 (key only)',
    'stripe/evt_0.5',
    'stripe/evt_1.5',
    'stripe/evt_2.5',
    'stripe/evt_3.5 (key only)',
    'stripe/evt_4.5 (key only)',
    'stripe/evt_failed_old', // a dead letter waits for a human
    'stripe/evt_stuck_old', // not finished: never pruned or deleted
  ]);
  expect(rows.filter((r) => r.pruned).every((r) => r.payload === null)).toBe(true);
  const steps = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.steps}`);
  expect(steps.rows[0]?.n).toBe(5); // only the events that kept their payload kept runs and steps
  expect(await retention.runOnce()).toMatchObject({ pruned: 0, deleted: 0 });
});

it('a redelivery after the payload went but inside the key horizon is a duplicate; one past the key horizon is answered expired, not processed', async () => {
  const inside = paymentSucceeded('evt_inside', { created: Math.floor(Date.now() / 1000) - 4 * 86_400 });
  expect((await deliver(ingest.url, signStripe(inside))).status).toBe(202);
  await db.pool.query(`UPDATE ${T.events} SET state = 'done', received_at = now() - interval '4 days' WHERE event_id = 'evt_inside'`);
  expect(await createRetention({ pool: db.pool, queries: q, log: testLog, settings: { policy, batchSize: 100, maxBatches: 1 } }).runOnce()).toMatchObject({
    pruned: 1,
    deleted: 0,
  });
  expect((await q.getEventByKey(db.pool, 'stripe', 'evt_inside'))?.prunedAt).toBeInstanceOf(Date);
  expect(await deliver(ingest.url, signStripe(inside))).toMatchObject({ status: 200, json: { status: 'duplicate' } });

  await ingest.queue.obliterate({ force: true });
  const late = paymentSucceeded('evt_late', { created: Math.floor(Date.now() / 1000) - 6 * 86_400 });
  const answer = await deliver(ingest.url, signStripe(late));
  expect(answer).toMatchObject({ status: 200, json: { status: 'expired' } });
  expect(String(answer.json.message)).toMatch(/beyond the 5-day key retention horizon \(KEY_RETENTION_DAYS\)/);
  expect(await q.getEventByKey(db.pool, 'stripe', 'evt_late')).toBeNull();
  expect(await probe.value(`webhook_events_total`, { provider: 'stripe', result: 'expired' })).toBe(1);
  expect(await ingest.queue.count()).toBe(0);
});

it('runs only as the reconciler leader', async () => {
  await aged('stripe', 'evt_old', 10, 'done');
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryLockKey(DEFAULT_SCHEMA, 'reconciler')]);
    const counts = await createRetention({ pool: db.pool, queries: q, log: testLog, settings: { policy, batchSize: 10, maxBatches: 1 } }).runOnce();
    expect(counts).toMatchObject({ leader: false, pruned: 0, deleted: 0 });
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
});

it('each batch is an index range scan with a limit: its cost does not grow with the table', async () => {
  // 200k done events over 60 days, three providers.
  await db.pool.query(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state, received_at, updated_at, finished_at)
     SELECT (ARRAY['stripe','github','shopify'])[1 + g % 3], 'x', 'evt_bulk_' || g, 't', '{}', 'done',
            now() - (g % 60) * interval '1 day', now(), now()
       FROM generate_series(1, 200000) g`,
  );
  await db.pool.query(`INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, finished_at) SELECT id, 'h', 'done', 1, now() FROM ${T.events}`);
  await db.pool.query(`ANALYZE ${T.events}`);
  await db.pool.query(`ANALYZE ${T.runs}`);
  // The real statements, prepared and explained with real parameters.
  const client = await db.pool.connect();
  const explain = async (sql: string, types: string, args: string) => {
    await client.query(`PREPARE q(${types}) AS ${sql}`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE q(${args})`);
    await client.query('DEALLOCATE q');
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  };
  try {
    const plan = await explain(q.RETENTION_DELETE_SQL, 'text, int, int', `'stripe', 30, 1000`);
    expect(plan).toMatch(/Limit/);
    expect(plan).toMatch(/Index Scan using events_done_retention_idx/);
    expect(plan).toMatch(/Index Scan using events_pkey/); // the delete itself, by primary key
    expect(plan).not.toMatch(/Seq Scan/);
    const prune = await explain(q.RETENTION_PRUNE_SQL, 'text, int, int', `'stripe', 3, 1000`);
    expect(prune).toMatch(/Limit/);
    expect(prune).toMatch(/Index Scan using events_prune_idx/);
    expect(prune).not.toMatch(/Seq Scan/);
    // The reconciler's batch statements have the same shape.
    for (const [sql, types, args] of [
      [q.STALE_EVENTS_SQL, 'int, int', '30000, 500'],
      [q.STALE_RUNS_SQL, 'int, int', '30000, 500'],
      [q.EXPIRED_LEASES_SQL, 'int', '500'],
    ] as const) {
      expect(await explain(sql, types, args)).not.toMatch(/Seq Scan/);
    }
  } finally {
    client.release();
  }
  const counts = await createRetention({ pool: db.pool, queries: q, log: testLog, settings: { policy, batchSize: 5000, maxBatches: 2 } }).runOnce();
  expect(counts.pruned).toBeGreaterThan(0);
  expect(counts.deleted).toBeGreaterThan(0);
  expect(Object.values(counts.bySource).every((n) => n.pruned <= 10_000 && n.deleted <= 10_000)).toBe(true); // bounded per run
});
