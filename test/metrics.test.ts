/**
 * Metrics move as described under a scripted run: new, duplicate and rejected deliveries at
 * the edge; a stuck event and its recovery, a dead letter and queue depth in
 * the worker's gauges (served on the worker's own /metrics by a real worker process).
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_SCHEMA, createWorkerMetrics } from '@oncehook/shared';
import { defineHandler } from '@oncehook/sdk';
import { advisoryLockKey, loadDestinations } from '@oncehook/core';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { createMetricsProbe } from './helpers/metrics.js';
import { killAllServices, spawnService, deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { type IngestHandle, q, testEnv, startIngest, startWorker, testPrefix, seedRun } from './helpers/stack.js';

let db: TestDatabase;
let ingest: IngestHandle;
const probe = createMetricsProbe();
const prefix = testPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  // What a worker publishes at start: the types something handles keep their `type` label.
  await q.registerHandlers(db.pool, 'test', [{ name: 'shop.payments', source: 'stripe', kind: 'stripe', type: 'payment_intent.succeeded', description: undefined }]);
  ingest = await startIngest({ databaseUrl: db.url, prefix, metrics: probe.metrics });
});
// Processes of a failed test never outlive it (they would work on the next test's events).
afterEach(async () => {
  await killAllServices();
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});

/** One series' value from Prometheus text. */
function series(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const set = match[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => set.includes(`${k}="${v}"`))) return Number(match[3]);
  }
  return undefined;
}

it('counts new, duplicate and rejected deliveries at the edge; duplicates are not errors', async () => {
  const event = paymentSucceeded('evt_metrics_1');
  await deliver(ingest.url, signStripe(event));
  await deliver(ingest.url, signStripe(event));
  await deliver(ingest.url, signStripe(event));
  await deliver(ingest.url, signStripe(paymentSucceeded('evt_metrics_forged'), { secret: 'whsec_wrong' }));
  const text = await (await fetch(`${ingest.url}/metrics`)).text();
  const type = 'payment_intent.succeeded';
  expect(series(text, `webhook_events_total`, { provider: 'stripe', type, result: 'new' })).toBe(1);
  expect(series(text, `webhook_events_total`, { provider: 'stripe', type, result: 'duplicate' })).toBe(2);
  expect(series(text, `webhook_events_total`, { provider: 'stripe', result: 'rejected' })).toBe(1);
  expect(series(text, `webhook_events_total`, { result: 'error' })).toBeUndefined();
  expect(series(text, 'webhook_rejections_total', { provider: 'stripe', reason: 'bad_signature' })).toBe(1);
  expect(series(text, 'webhook_ingest_duration_seconds_count', { result: 'duplicate' })).toBe(2);
});

it("a worker's gauges show a stuck event, its recovery and a dead letter", async () => {
  // A stuck event: processing with an expired lease (its worker died), and a dead letter.
  const stuck = await q.claimEvent(db.pool, {
    source: 'stripe',
    kind: 'stripe',
    eventId: 'evt_stuck',
    type: 'payment_intent.succeeded',
    signedAt: null,
    rawBody: JSON.stringify(paymentSucceeded('evt_stuck')),
    payload: {},
    meta: {},
  });
  if (stuck.outcome !== 'new') throw new Error('expected new');
  await seedRun(db.pool, stuck.rowId, { state: 'processing', leaseMs: 1 });
  const deadLetter = await q.getEventByKey(db.pool, 'stripe', 'evt_metrics_1');
  await seedRun(db.pool, deadLetter!.id, { state: 'failed', lastError: 'x' });

  const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { RECONCILE_INTERVAL_MS: '300', LEASE_MS: '2000' } }));
  const port = /worker metrics on (\d+)/.exec(await worker.waitFor(/worker metrics on \d+/))?.[1];
  const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();

  // The reconciler reclaims the stuck event and the worker finishes it; the counters say so.
  await waitFor(async () => (await q.getEvent(db.pool, stuck.rowId))?.state === 'done', { what: 'stuck event recovered' });
  const after = await waitFor(
    async () => {
      const text = await scrape();
      // The queue drained too: the re-enqueued job was taken (the gauge is refreshed each pass).
      return series(text, `webhook_events_processed_total`, { outcome: 'done' }) === 1 &&
        series(text, `webhook_events_stuck`, { kind: 'processing_lease_expired' }) === 0 &&
        series(text, 'webhook_queue_jobs', { state: 'waiting' }) === 0
        ? text
        : null;
    },
    { what: 'gauges refreshed after recovery' },
  );
  expect(series(after, 'webhook_reconciler_recoveries_total', { kind: 'reclaimed' })).toBe(1);
  expect(series(after, 'webhook_dead_letters')).toBe(1);
  expect(series(after, `webhook_events_by_state`, { state: 'failed' })).toBe(1);
  expect(series(after, 'webhook_queue_jobs', { state: 'waiting' })).toBe(0);
  expect(series(after, 'webhook_queue_oldest_waiting_seconds')).toBe(0);
  expect(series(after, 'webhook_processing_duration_seconds_count', { provider: 'stripe', outcome: 'done' })).toBe(1);
  expect(series(after, 'webhook_reconciler_leader')).toBe(1);
  await worker.stop();
});

it('an event left processing by a killed worker shows in the stuck gauge, then is recovered', async () => {
  const localPrefix = testPrefix();
  const localIngest = await startIngest({ databaseUrl: db.url, prefix: localPrefix });
  // Worker A stalls inside the step transaction; its lease is 2 s.
  const a = spawnService('worker', testEnv({ databaseUrl: db.url, prefix: localPrefix, extra: { ONCEHOOK_FAULTS: 'worker.step-before-commit:delay=60000', LEASE_MS: '2000' } }));
  await a.waitFor(/worker ready/);
  await deliver(localIngest.url, signStripe(paymentSucceeded('evt_killed_worker')));
  await a.waitFor(/oncehook-fault worker.step-before-commit/);

  // Worker B watches. We hold the reconciler's leadership lock so the stuck state lasts long
  // enough to be seen; B's long lease keeps BullMQ's own stalled check out of the way.
  const b = spawnService('worker', testEnv({ databaseUrl: db.url, prefix: localPrefix, extra: { RECONCILE_INTERVAL_MS: '200', LEASE_MS: '15000' } }));
  const port = /worker metrics on (\d+)/.exec(await b.waitFor(/worker metrics on \d+/))?.[1];
  const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const holder = await db.pool.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryLockKey(DEFAULT_SCHEMA, 'reconciler')]);
  try {
    await a.kill9();
    await waitFor(async () => series(await scrape(), `webhook_events_stuck`, { kind: 'processing_lease_expired' }) === 1, { what: 'stuck gauge at 1', timeoutMs: 15_000 });
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  await waitFor(async () => (await q.getEventByKey(db.pool, 'stripe', 'evt_killed_worker'))?.state === 'done', { what: 'recovered by B' });
  await waitFor(
    async () => {
      const text = await scrape();
      return series(text, `webhook_events_stuck`, { kind: 'processing_lease_expired' }) === 0 && series(text, 'webhook_reconciler_recoveries_total', { kind: 'reclaimed' }) === 1;
    },
    { what: 'gauge back to 0, one recovery counted' },
  );
  await b.stop();
  await localIngest.close();
});

it("300 signed events of made-up types through a worker whose destination takes every type: the worker's series stay bounded", async () => {
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end('{}'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const metrics = createWorkerMetrics({ defaultMetrics: false });
  const [forward] = loadDestinations({
    DESTINATION_NAME: 'everything',
    DESTINATION_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
    DESTINATION_SECRET: `whsec_${Buffer.from('metrics-label-test-secret-32byte').toString('base64')}`,
  });
  const payments = defineHandler({ name: 'shop.payments', source: 'stripe', type: 'payment_intent.succeeded' }, async () => {});
  const worker = await startWorker({ databaseUrl: db.url, prefix, handlers: [payments], destinations: [forward!], metrics });
  try {
    const types = Array.from({ length: 300 }, (_, i) => `junk.${i}.${Math.random().toString(36).slice(2, 10)}`);
    for (let i = 0; i < types.length; i += 30) {
      await Promise.all(types.slice(i, i + 30).map((type, j) => deliver(ingest.url, signStripe({ ...paymentSucceeded(`evt_label_${i + j}`), type }))));
    }
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_label_known')));
    await waitFor(
      async () => ((await metrics.processedTotal.get()).values.filter((v) => v.labels.handler === 'everything').reduce((n, v) => n + v.value, 0) >= 301 ? true : null),
      { timeoutMs: 60_000, what: '301 destination runs counted' },
    );
    const labels = new Set((await metrics.processedTotal.get()).values.map((v) => String(v.labels.type)));
    expect([...labels].sort()).toEqual(['other', 'payment_intent.succeeded']);
    const durations = new Set((await metrics.processingDuration.get()).values.map((v) => String(v.labels.type)));
    expect([...durations].sort()).toEqual(['other', 'payment_intent.succeeded']);
    // The whole /metrics text stays small: no series per type.
    expect((await metrics.registry.metrics()).length).toBeLessThan(40_000);
  } finally {
    await worker.close();
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  }
});
