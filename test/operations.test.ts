/**
 * Dead letters, re-drive and replay, through the operations API and the CLI, against real
 * Postgres, Redis, a worker and the sandbox.
 */
import { allSources, REDIS_URL, send, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { createOperations, type Operations, type ReplayPlan } from '@oncehook/core';
import type { OncehookWorker } from 'oncehook';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { type CliResult, runCliHere } from './helpers/cli-here.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { renewal, shopifyOrder, stripeOrderPayment } from './helpers/orders.js';
import { claimStripe, q, seedRun, startIngest, startWorker, T, TEST_QUEUE_BACKEND, TRUNCATE_ALL, testPrefix, type IngestHandle } from './helpers/stack.js';
import { deliver } from '@oncehook/harness';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: OncehookWorker;
let ops: Operations;
const prefix = testPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources() });
  worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
  ops = createOperations({ pool: db.pool, queries: q, queue: ingest.queue });
});
afterAll(async () => {
  await worker.close();
  await ingest.close();
  await sandbox.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(TRUNCATE_ALL);
  sandbox.sandbox.reset();
});

async function settled(provider: string, eventId: string, state: 'done' | 'failed', generation = 0) {
  return waitFor(
    async () => {
      const row = await q.getEventByKey(db.pool, provider, eventId);
      if (row?.state !== state) return null;
      const runs = await q.getRuns(db.pool, row.id);
      return runs.every((r) => r.generation >= generation) ? row : null;
    },
    { what: `${provider}/${eventId} ${state}` },
  );
}

it('re-drive finishes a failed event without a second external effect', async () => {
  // The charge succeeds, then the email API refuses (a permanent 400): the run is a dead letter.
  sandbox.faults([{ service: 'email', mode: 'status', status: 400, times: 1 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(1));
  const failed = await settled('shopify', 'wh-order-1', 'failed');
  const [run] = await q.getRuns(db.pool, failed.id);
  expect(run?.lastError).toMatch(/email API answered 400/);
  expect(sandbox.stats().payment.applied).toBe(1);

  const result = await ops.redrive(failed.id, {}, 'alice', 'email provider fixed');
  expect(result).toEqual({ ok: true, rowId: failed.id, runs: [{ handler: 'shop.shopify-orders', fromState: 'failed', generation: 0 }] });
  await settled('shopify', 'wh-order-1', 'done');
  const stats = sandbox.stats();
  expect(stats.payment.applied).toBe(1); // the recorded charge step was skipped
  expect(stats.payment.requests).toBe(1);
  expect(stats.email.applied).toBe(1);
  expect(stats.fulfilment.applied).toBe(1);
  const detail = await ops.show(failed.id);
  expect(detail?.operatorActions).toEqual([
    expect.objectContaining({ mode: 'redrive', handler: 'shop.shopify-orders', fromState: 'failed', generation: 0, actor: 'alice', reason: 'email provider fixed' }),
  ]);
});

it('a replay of one step produces exactly one new effect for it, with a new key, and reuses the rest', async () => {
  // A renewal: charge (payment API) then record (ledger).
  await send(ingest.url, 'standard-webhooks', await renewal(7));
  const done = await settled('standard-webhooks', 'msg_renewal_7', 'done');
  const firstKeys = Object.keys(sandbox.stats().payment.appliedByKey);
  expect(firstKeys).toHaveLength(1);

  const result = await ops.replay(done.id, { steps: ['charge'] }, 'bob', 'the bank reversed the charge; charge again');
  expect(result).toMatchObject({
    ok: true,
    dryRun: false,
    plan: { handler: 'shop.renewals', generation: 0, nextGeneration: 1, reuse: [{ name: 'record-renewal', kind: 'local' }] },
  });
  await settled('standard-webhooks', 'msg_renewal_7', 'done', 1);
  const stats = sandbox.stats();
  expect(stats.payment.applied).toBe(2); // exactly one new charge
  const newKeys = Object.keys(stats.payment.appliedByKey).filter((k) => !firstKeys.includes(k));
  expect(newKeys).toEqual([(result as { plan: ReplayPlan }).plan.rerun[0]?.idempotencyKey]); // under the key the plan announced
  const steps = await db.pool.query(
    `SELECT s.generation, s.name, s.reused_from AS "reusedFrom" FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id WHERE r.event_row_id = $1 ORDER BY s.generation, s.name`,
    [done.id],
  );
  expect(steps.rows).toEqual([
    { generation: 0, name: 'charge', reusedFrom: null },
    { generation: 0, name: 'record-renewal', reusedFrom: null },
    { generation: 1, name: 'charge', reusedFrom: null },
    { generation: 1, name: 'record-renewal', reusedFrom: 0 },
  ]);
  const ledger = await db.pool.query('SELECT count(*)::int AS n FROM ledger_entries');
  expect(ledger.rows[0]).toEqual({ n: 1 }); // the local step was reused, not re-run
});

it('replay of a paid order with --steps request-shipment: one new shipment, no new ledger entry, no new receipt', async () => {
  await deliver(ingest.url, stripeOrderPayment({ eventId: 'evt_paid_order', orderId: 'order-ship-again', amount: 2000, total: 2000 }));
  const done = await settled('stripe', 'evt_paid_order', 'done');
  const before = sandbox.stats();
  expect([before.fulfilment.applied, before.email.applied]).toEqual([1, 1]);

  // The dry run shows the plan and changes nothing.
  const dry = await ops.replay(done.id, { steps: ['request-shipment'], dryRun: true }, 'carol', 'carrier lost the parcel');
  expect(dry).toMatchObject({
    ok: true,
    dryRun: true,
    plan: {
      rerun: [{ name: 'request-shipment', kind: 'external', idempotencyKey: expect.stringMatching(/^oncehook-/) }],
      reuse: [
        { name: 'record-payment', kind: 'local' },
        { name: 'send-receipt', kind: 'external' },
        { name: 'record-fulfilment', kind: 'local' },
      ],
      localRerun: [],
    },
  });
  expect((await q.getRuns(db.pool, done.id))[0]).toMatchObject({ state: 'done', generation: 0 });

  const result = await ops.replay(done.id, { steps: ['request-shipment'] }, 'carol', 'carrier lost the parcel; ship again');
  expect(result.ok).toBe(true);
  await settled('stripe', 'evt_paid_order', 'done', 1);
  const after = sandbox.stats();
  expect(after.fulfilment.applied).toBe(2); // exactly one new shipment
  expect(after.email.applied).toBe(1); // no new receipt
  const { rows } = await db.pool.query(`SELECT count(*)::int AS entries, (SELECT paid_cents::int FROM example_orders WHERE id = 'order-ship-again') AS paid FROM ledger_entries`);
  expect(rows[0]).toEqual({ entries: 1, paid: 2000 }); // no second credit, not paid twice
});

it('replay needs the steps said explicitly, checks their names, and --all-steps lists the local steps it re-runs', async () => {
  await deliver(ingest.url, stripeOrderPayment({ eventId: 'evt_all_steps', orderId: 'order-all', amount: 500, total: 500 }));
  const done = await settled('stripe', 'evt_all_steps', 'done');
  expect(await ops.replay(done.id, {}, 'dave', 'x')).toMatchObject({
    ok: false,
    reason: expect.stringMatching(/say which steps to run again: steps \(recorded: record-payment, send-receipt, request-shipment, record-fulfilment\)/),
  });
  expect(await ops.replay(done.id, { steps: ['request-shipmnet'] }, 'dave', 'x')).toMatchObject({
    ok: false,
    reason: expect.stringMatching(/no recorded step named "request-shipmnet"/),
  });
  const all = await ops.replay(done.id, { allSteps: true, dryRun: true }, 'dave', 'x');
  expect(all).toMatchObject({ ok: true, plan: { reuse: [], localRerun: ['record-payment', 'record-fulfilment'] } });
});

it('never races a worker that holds the lease', async () => {
  const rowId = await claimStripe(db.pool, 'leased', 'x');
  await seedRun(db.pool, rowId, { handler: 'h', state: 'processing', leaseToken: '00000000-0000-4000-8000-0000000000aa' });
  const redrive = await ops.redrive(rowId, {}, 'carol', 'try');
  const replay = await ops.replay(rowId, { allSteps: true }, 'carol', 'try');
  expect(redrive).toMatchObject({ ok: false, reason: expect.stringMatching(/being run by a worker/) });
  expect(replay).toMatchObject({ ok: false, reason: expect.stringMatching(/being run by a worker/) });
  expect((await q.getRuns(db.pool, rowId))[0]?.leaseToken).toBe('00000000-0000-4000-8000-0000000000aa');
  // The guarded statement itself (the check above could race with a worker): 0 rows.
  expect(await q.replayRun(db.pool, { rowId, handler: 'h', reuse: [], actor: 'carol', reason: 'race', detail: null })).toBeNull();
  expect((await q.getRuns(db.pool, rowId))[0]).toMatchObject({ state: 'processing', generation: 0 });
});

it('bulk re-drive: the dry run changes nothing; the real run re-drives each', async () => {
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 3 }]);
  for (const n of [10, 11, 12]) await send(ingest.url, 'shopify', await shopifyOrder(n));
  await waitFor(async () => (await ops.list({ state: 'failed' })).length === 3, { what: '3 dead letters' });

  const dry = await ops.bulkRedrive({ source: 'shopify' }, { dryRun: true, actor: 'dave', reason: 'check' });
  expect(dry).toMatchObject({ dryRun: true, matched: 3 });
  expect((await ops.list({ state: 'failed' })).length).toBe(3);
  expect(sandbox.stats().payment.requests).toBe(3);

  const real = await ops.bulkRedrive({ source: 'shopify' }, { dryRun: false, actor: 'dave', reason: 'card issuer back' });
  expect(real.results.every((r) => r.ok)).toBe(true);
  await waitFor(async () => (await ops.list({ state: 'done' })).length === 3, { what: 'all re-driven' });
  expect(sandbox.stats().payment.applied).toBe(3);
});

/**
 * `oncehook <args>` against this file's stack, in this process (runCliHere: a process per
 * command cost ~2.5 s of CPU, thirteen of them here, twice with the queue in Postgres;
 * test/cli.test.ts proves the exit codes of the real entry point).
 */
function cli(args: string[]): Promise<CliResult> {
  return runCliHere(args, { DATABASE_URL: db.url, REDIS_URL, QUEUE_BACKEND: TEST_QUEUE_BACKEND, QUEUE_PREFIX: prefix });
}

it('the CLI lists dead letters, shows one, re-drives it, and replays with a printed plan', async () => {
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 1 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(20));
  const failed = await settled('shopify', 'wh-order-20', 'failed');

  const list = await cli(['list', '--state', 'failed']);
  expect(list.code).toBe(0);
  expect(list.output).toContain('shopify/wh-order-20');
  expect(list.output).toContain('shop.shopify-orders:failed');
  expect(list.output).toContain('1 event(s)');

  const show = await cli(['show', 'shopify/wh-order-20', '--json']);
  expect(show.code).toBe(0);
  expect(JSON.parse(show.output).event).toMatchObject({ id: failed.id, state: 'failed' });
  // Without --json: a summary first (state, each run with its last error, deliveries), then the payload.
  const readable = await cli(['show', 'shopify/wh-order-20']);
  expect(readable.code).toBe(0);
  expect(readable.output).toMatch(new RegExp(`^event ${failed.id}  shopify/wh-order-20  orders/create\\n  state failed`));
  expect(readable.output).toMatch(/\n {2}shop\.shopify-orders: failed, attempt 1, generation 0\n {4}last error: PermanentError: /);
  expect(readable.output).toMatch(/\npayload:\n\{/);

  // The failure groups: this dead letter's, and its re-drive by group after a dry run.
  const groups = await cli(['failures']);
  expect(groups.code, groups.output).toBe(0);
  const groupId = /^([0-9a-f]{12}) {2}shop\.shopify-orders: 1 failed, 0 retrying/m.exec(groups.output)?.[1];
  expect(groupId, groups.output).toBeDefined();
  const byGroup = await cli(['list', '--group', groupId!]);
  expect(byGroup.output).toContain('1 event(s)');
  expect((await cli(['resolve', groupId!])).code).toBe(2); // --reason is required
  expect((await cli(['resolve', 'nothex', '--reason', 'x'])).code).toBe(2);

  expect((await cli(['redrive', String(failed.id)])).code).toBe(2); // --reason is required
  const redrive = await cli(['redrive', String(failed.id), '--reason', 'retry after fix', '--actor', 'erin']);
  expect(redrive.code).toBe(0);
  expect(redrive.output).toMatch(/handler "shop.shopify-orders" failed -> received \(same generation 0/);
  await settled('shopify', 'wh-order-20', 'done');

  const dry = await cli(['replay', String(failed.id), '--all-steps', '--dry-run']);
  expect(dry.code).toBe(0);
  expect(dry.output).toMatch(/dry run: would replay .* generation 0 -> 1 \(nothing changed\)/);
  expect(dry.output).toMatch(/LOCAL steps that run again \(their database writes apply again\): record-order, record-fulfilment/);
  expect(await cli(['replay', String(failed.id), '--reason', 'x'])).toMatchObject({ code: 1, output: expect.stringMatching(/say which steps to run again/) });
  expect((await cli(['replay', '999999', '--reason', 'x', '--steps', 'charge'])).code).toBe(1);
  const help = await cli(['replay', '--help']);
  expect(help.code).toBe(0);
  expect(help.output).toMatch(/--steps names the recorded steps to run again/);
});
