/**
 * Effects exactly once, end to end: real ingest, two real worker processes, the sandbox APIs
 * with faults, real Postgres and Redis. Sandbox counters are the ground truth.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { customerUpdated, renewal, shopifyOrder, stripeOrderPayment } from './helpers/orders.js';
import { killAllServices, spawnService } from '@oncehook/harness';
import { allSources, send } from '@oncehook/harness';
import { maxAppliedPerKey, startSandbox, type SandboxHandle } from '@oncehook/harness';
import { type IngestHandle, testEnv, startIngest, stateCounts, testPrefix, T, onlyRun } from './helpers/stack.js';
import { deliver } from '@oncehook/harness';
import { waitFor } from '@oncehook/harness';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  const prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources() });
  const workers = [1, 2].map(() => spawnService('worker', testEnv({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url, extra: { MAX_ATTEMPTS: '4' } })));
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
});
afterAll(async () => {
  await killAllServices();
  await ingest.close();
  await sandbox.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events}, ledger_entries, ledger_accounts, example_orders, example_customers CASCADE`);
  sandbox.sandbox.reset();
});

async function allFinished(expected: number): Promise<Record<string, number>> {
  return waitFor(
    async () => {
      const counts = await stateCounts(db.pool);
      return (counts.done ?? 0) + (counts.failed ?? 0) === expected && !counts.received && !counts.processing ? counts : null;
    },
    { timeoutMs: 45_000, what: `${expected} events finished` },
  );
}

it('with "apply then fail" on every first call: each order charged, emailed and shipped exactly once', async () => {
  sandbox.faults([
    { service: 'payment', mode: 'apply_then_fail', firstAttemptPerKey: true },
    { service: 'email', mode: 'apply_then_fail', firstAttemptPerKey: true },
    { service: 'fulfilment', mode: 'apply_then_fail', firstAttemptPerKey: true },
  ]);
  const deliveries: Promise<unknown>[] = [];
  for (let n = 0; n < 10; n += 1) {
    const order = await shopifyOrder(n);
    deliveries.push(send(ingest.url, 'shopify', order), send(ingest.url, 'shopify', order)); // and a duplicate
  }
  for (let n = 0; n < 5; n += 1) deliveries.push(deliver(ingest.url, stripeOrderPayment({ eventId: `evt_order_${n}`, orderId: `stripe-order-${n}`, amount: 900, total: 900 })));
  for (let n = 0; n < 5; n += 1) deliveries.push(send(ingest.url, 'standard-webhooks', await renewal(n)));
  await Promise.all(deliveries);

  expect(await allFinished(20)).toEqual({ done: 20 });
  const stats = sandbox.stats();
  // 10 Shopify orders + 5 renewals charged; 10 + 5 orders emailed and shipped.
  expect(stats.payment.applied).toBe(15);
  expect(stats.email.applied).toBe(15);
  expect(stats.fulfilment.applied).toBe(15);
  for (const service of [stats.payment, stats.email, stats.fulfilment]) expect(maxAppliedPerKey(service)).toBe(1);
  // Every first call had its response lost after applying: the retry was answered from the
  // provider's idempotency store, not applied again.
  expect(stats.payment.faults + stats.email.faults + stats.fulfilment.faults).toBe(45);
  expect(stats.payment.replays + stats.email.replays + stats.fulfilment.replays).toBeGreaterThanOrEqual(45);

  const { rows } = await db.pool.query<{ shipped: number; receipts: number }>(
    `SELECT count(*) FILTER (WHERE shipment_id IS NOT NULL)::int AS shipped, sum(cardinality(receipt_ids))::int AS receipts FROM example_orders`,
  );
  expect(rows[0]).toEqual({ shipped: 15, receipts: 15 });
  const ledger = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger_entries`);
  expect(ledger.rows[0]?.n).toBe(20);
});

it('a permanent error from an API ends the event failed, with the error recorded', async () => {
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 1 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(100));
  await allFinished(1);
  const found = await onlyRun(db.pool, 'shopify', 'wh-order-100');
  expect(found?.event.state).toBe('failed');
  expect(found?.run).toMatchObject({ state: 'failed', attempts: 1 });
  expect(found?.run.lastError).toMatch(/PermanentError: payment API answered 402/);
  expect(sandbox.stats().payment.applied).toBe(0);
  expect(sandbox.stats().email.applied).toBe(0);
});

it('a transient error outlasting the client retries is retried by the event, with the same key', async () => {
  // Four 503s exhaust the first attempt's tries; the event's second attempt succeeds.
  sandbox.faults([{ service: 'payment', mode: 'status', status: 503, times: 5 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(200));
  await allFinished(1);
  const found = await onlyRun(db.pool, 'shopify', 'wh-order-200');
  expect(found?.event.state).toBe('done');
  expect(found?.run.attempts).toBeGreaterThanOrEqual(2);
  expect(found?.run.lastError).toMatch(/OutboundUnavailableError: payment API/);
  const payment = sandbox.stats().payment;
  expect(payment.applied).toBe(1);
  expect(payment.requests).toBe(6);
  expect(Object.keys(payment.appliedByKey)).toHaveLength(1);
  // Every try of both attempts carried the one key that was applied. (Guards key determinism:
  // with a key that changes per attempt, the first attempt's four 503s applied nothing, so
  // only this assertion tells the keys apart. Mutant: key-includes-attempt.)
  expect(payment.requestKeys).toHaveLength(6);
  expect(new Set(payment.requestKeys)).toEqual(new Set(Object.keys(payment.appliedByKey)));
});

it('concurrent payments for the same order: serialized per order, no lost update, shipped once', async () => {
  const N = 12;
  await Promise.all(
    Array.from({ length: N }, (_, i) => deliver(ingest.url, stripeOrderPayment({ eventId: `evt_part_${i}`, orderId: 'order-concurrent', amount: 100, total: N * 100 }))),
  );
  expect(await allFinished(N)).toEqual({ done: N });
  const { rows } = await db.pool.query(
    `SELECT paid_cents::int AS paid, payments, status, cardinality(receipt_ids) AS receipts, shipment_id IS NOT NULL AS shipped FROM example_orders WHERE id = 'order-concurrent'`,
  );
  expect(rows[0]).toEqual({ paid: N * 100, payments: N, status: 'paid', receipts: N, shipped: true });
  expect(sandbox.stats().fulfilment.applied).toBe(1);
  expect(sandbox.stats().email.applied).toBe(N);
  const balance = await db.pool.query(`SELECT balance_cents::int AS b FROM ledger_accounts WHERE id = 'cus_orders'`);
  expect(balance.rows[0]).toEqual({ b: N * 100 });
});

it('an out-of-order (stale) customer update is ignored; a newer one applies', async () => {
  const t = Math.floor(Date.now() / 1000);
  expect((await deliver(ingest.url, customerUpdated('evt_cu_new', t - 10, 'new@example.com'))).status).toBe(202);
  await allFinished(1);
  expect((await deliver(ingest.url, customerUpdated('evt_cu_old', t - 100, 'old@example.com'))).status).toBe(202);
  await allFinished(2);
  let profile = await db.pool.query(`SELECT email FROM example_customers WHERE id = 'cus_profile'`);
  expect(profile.rows[0]).toEqual({ email: 'new@example.com' });
  const stale = await db.pool.query(
    `SELECT s.result FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id JOIN ${T.events} e ON e.id = r.event_row_id WHERE e.event_id = 'evt_cu_old'`,
  );
  expect(stale.rows[0]).toMatchObject({ result: { applied: false, reason: 'stale' } });

  await deliver(ingest.url, customerUpdated('evt_cu_newest', t, 'newest@example.com'));
  await allFinished(3);
  profile = await db.pool.query(`SELECT email FROM example_customers WHERE id = 'cus_profile'`);
  expect(profile.rows[0]).toEqual({ email: 'newest@example.com' });
});
