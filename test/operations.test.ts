/**
 * Dead letters, re-drive and replay, through the operations API and the CLI, against real
 * Postgres, Redis, workers and the sandbox.
 */
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createOperations, queries, type Operations } from '@oncehook/shared';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { REDIS_URL } from './helpers/db-urls';
import { renewal, shopifyOrder } from './helpers/orders';
import { ROOT } from './helpers/processes';
import { allSources, send } from './helpers/providers';
import { startSandbox, type SandboxHandle } from './helpers/sandbox';
import { startIngest, startWorker, testPrefix, type IngestHandle, type WorkerHandle } from './helpers/stack';
import { waitFor } from './helpers/wait';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: WorkerHandle;
let ops: Operations;
const prefix = testPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  ingest = await startIngest({ pool: db.pool, prefix, sources: allSources() });
  worker = startWorker({ pool: db.pool, prefix, sandboxUrl: sandbox.url });
  ops = createOperations({ pool: db.pool, queue: ingest.queue });
});
afterAll(async () => {
  await worker.close();
  await ingest.close();
  await sandbox.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('TRUNCATE webhook_events, ledger_entries, ledger_accounts, example_orders CASCADE');
  sandbox.sandbox.reset();
});

async function settled(eventId: string, state: 'done' | 'failed') {
  return waitFor(async () => {
    const row = await queries.getEventByKey(db.pool, 'shopify', eventId);
    return row?.state === state ? row : null;
  }, { what: `${eventId} ${state}` });
}

it('re-drive finishes a failed event without a second external effect', async () => {
  // The charge succeeds, then the email API refuses (a permanent 400): the event is a dead letter.
  sandbox.faults([{ service: 'email', mode: 'status', status: 400, times: 1 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(1));
  const failed = await settled('wh-order-1', 'failed');
  expect(failed.lastError).toMatch(/email API answered 400/);
  expect(sandbox.stats().payment.applied).toBe(1);

  const result = await ops.redrive(failed.id, 'alice', 'email provider fixed');
  expect(result).toEqual({ ok: true, rowId: failed.id, fromState: 'failed' });
  await settled('wh-order-1', 'done');
  const stats = sandbox.stats();
  expect(stats.payment.applied).toBe(1); // the recorded charge step was skipped
  expect(stats.payment.requests).toBe(1);
  expect(stats.email.applied).toBe(1);
  expect(stats.fulfilment.applied).toBe(1);
  const detail = await ops.show(failed.id);
  expect(detail?.operatorActions).toEqual([expect.objectContaining({ mode: 'redrive', fromState: 'failed', generation: 0, actor: 'alice', reason: 'email provider fixed' })]);
});

it('a deliberate replay produces exactly one new effect per step, with new keys', async () => {
  // A renewal: charge (payment API) then record (ledger).
  await send(ingest.url, 'standard-webhooks', await renewal(7));
  const done = await waitFor(async () => {
    const row = await queries.getEventByKey(db.pool, 'standard-webhooks', 'msg_renewal_7');
    return row?.state === 'done' ? row : null;
  }, { what: 'renewal done' });
  const firstKeys = Object.keys(sandbox.stats().payment.appliedByKey);
  expect(firstKeys).toHaveLength(1);

  const result = await ops.replay(done.id, 'bob', 'customer was not charged by the bank; charge again');
  expect(result).toMatchObject({ ok: true, fromState: 'done', generation: 1 });
  await waitFor(async () => {
    const row = await queries.getEvent(db.pool, done.id);
    return row?.state === 'done' && row.generation === 1;
  }, { what: 'replay done' });
  const stats = sandbox.stats();
  expect(stats.payment.applied).toBe(2); // exactly one new charge
  const newKeys = Object.keys(stats.payment.appliedByKey).filter((k) => !firstKeys.includes(k));
  expect(newKeys).toHaveLength(1); // under a new key
  const steps = await db.pool.query(`SELECT generation, count(*)::int AS n FROM webhook_event_steps WHERE event_row_id = $1 GROUP BY generation ORDER BY generation`, [done.id]);
  expect(steps.rows).toEqual([{ generation: 0, n: 2 }, { generation: 1, n: 2 }]);
  const ledger = await db.pool.query(`SELECT count(*)::int AS n FROM ledger_entries`);
  expect(ledger.rows[0]).toEqual({ n: 2 });
});

it('never races a worker that holds the lease', async () => {
  const claim = await queries.claimEvent(db.pool, { provider: 'shopify', kind: 'shopify', eventId: 'leased', type: 'x', signedAt: null, rawBody: '{}', payload: {}, meta: {} });
  if (claim.outcome !== 'new') throw new Error('expected new');
  await queries.acquireLease(db.pool, claim.rowId, '00000000-0000-4000-8000-0000000000aa', 60_000);
  const redrive = await ops.redrive(claim.rowId, 'carol', 'try');
  const replay = await ops.replay(claim.rowId, 'carol', 'try');
  expect(redrive).toMatchObject({ ok: false, reason: expect.stringMatching(/being processed by a worker/) });
  expect(replay).toMatchObject({ ok: false, reason: expect.stringMatching(/being processed by a worker/) });
  expect((await queries.getEvent(db.pool, claim.rowId))?.leaseToken).toBe('00000000-0000-4000-8000-0000000000aa');
});

it('bulk re-drive: the dry run changes nothing; the real run re-drives each', async () => {
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 3 }]);
  for (const n of [10, 11, 12]) await send(ingest.url, 'shopify', await shopifyOrder(n));
  await waitFor(async () => (await ops.list({ state: 'failed' })).length === 3, { what: '3 dead letters' });

  const dry = await ops.bulkRedrive({ provider: 'shopify' }, { dryRun: true, actor: 'dave', reason: 'check' });
  expect(dry).toMatchObject({ dryRun: true, matched: 3 });
  expect((await ops.list({ state: 'failed' })).length).toBe(3);
  expect(sandbox.stats().payment.requests).toBe(3);

  const real = await ops.bulkRedrive({ provider: 'shopify' }, { dryRun: false, actor: 'dave', reason: 'card issuer back' });
  expect(real.results.every((r) => r.ok)).toBe(true);
  await waitFor(async () => (await ops.list({ state: 'done' })).length === 3, { what: 'all re-driven' });
  expect(sandbox.stats().payment.applied).toBe(3);
});

function cli(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'apps/worker/src/oncehook-cli.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db.url, REDIS_URL, QUEUE_PREFIX: prefix },
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

it('the CLI lists dead letters, shows one, and re-drives it', async () => {
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 1 }]);
  await send(ingest.url, 'shopify', await shopifyOrder(20));
  const failed = await settled('wh-order-20', 'failed');

  const list = await cli(['list', '--state', 'failed']);
  expect(list.code).toBe(0);
  expect(list.output).toContain('shopify/wh-order-20');
  expect(list.output).toContain('1 event(s)');

  const show = await cli(['show', 'shopify/wh-order-20']);
  expect(show.code).toBe(0);
  expect(JSON.parse(show.output).event).toMatchObject({ id: failed.id, state: 'failed' });

  expect((await cli(['redrive', String(failed.id)])).code).toBe(2); // --reason is required
  const redrive = await cli(['redrive', String(failed.id), '--reason', 'retry after fix', '--actor', 'erin']);
  expect(redrive.code).toBe(0);
  expect(redrive.output).toMatch(/failed -> received \(same generation/);
  await settled('wh-order-20', 'done');

  const refused = await cli(['replay', '999999', '--reason', 'x']);
  expect(refused.code).toBe(1);
});
