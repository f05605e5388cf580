/**
 * Fan-out with per-handler idempotency: two handlers on one Stripe event type, each with its
 * own run (state, lease, attempts, steps, generation). One fails its first 3 attempts while the
 * other succeeds at once: the succeeding handler's external call is made exactly once and never
 * re-run; the failing one finishes later; the event is `done` when both are; replaying one
 * handler leaves the other untouched. Real ingest, worker, sandbox, Postgres and Redis.
 */
import { deliver, paymentSucceeded, signStripe, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { createOutboundClient, defineHandler } from '@oncehook/sdk';
import { createOperations } from '@oncehook/core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { FAST, q, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let sandbox: SandboxHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
});
afterAll(async () => {
  await sandbox.close();
  await db.drop();
});

it('two handlers on one event: the one that succeeds calls out once, the one that fails 3 times finishes later, the event is done when both are, a replay of one leaves the other alone', {
  timeout: 60_000,
}, async () => {
  const email = createOutboundClient({ name: 'fan-email', baseUrl: `${sandbox.url}/email` });
  const receipts = defineHandler({ name: 'fan.receipt', source: 'stripe', type: 'payment_intent.succeeded' }, async (event, ctx) => {
    await ctx.step('send-receipt', async ({ idempotencyKey, signal }) => {
      const sent = await email.request<{ id: string }>({
        method: 'POST',
        path: '/emails',
        body: { to: 'buyer@example.com', subject: `receipt for ${event.eventId}`, text: 'thanks' },
        idempotencyKey,
        idempotencyKeyField: 'dedupe_key',
        signal,
      });
      return { emailId: sent.body.id };
    });
  });
  let flakyCalls = 0;
  const flaky = defineHandler({ name: 'fan.analytics', source: 'stripe', type: 'payment_intent.succeeded' }, async (event, ctx) => {
    flakyCalls += 1;
    if (event.attempt <= 3) throw new Error(`analytics store unavailable (attempt ${event.attempt})`);
    await ctx.transaction('count', async () => ({ counted: event.eventId }), { final: true });
  });

  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  const worker = await startWorker({ databaseUrl: db.url, prefix, handlers: [receipts, flaky], env: { ...FAST, RETRY_BACKOFF_MS: '300' } });
  try {
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_fan', { account: 'acct_fan', amount: 10 })))).status).toBe(202);
    const run = async (handler: string) => {
      const { rows } = await db.pool.query<{ state: string; attempts: number; generation: number }>(
        `SELECT r.state, r.attempts, r.generation FROM ${T.runs} r JOIN ${T.events} e ON e.id = r.event_row_id WHERE e.event_id = 'evt_fan' AND r.handler = $1`,
        [handler],
      );
      return rows[0];
    };
    const eventState = async () => (await q.getEventByKey(db.pool, 'stripe', 'evt_fan'))?.state;

    // The receipt is done while the analytics run is still retrying: the event is not done yet.
    await waitFor(async () => (await run('fan.receipt'))?.state === 'done', { what: 'receipt run done' });
    expect((await run('fan.analytics'))?.state).not.toBe('done');
    expect(await eventState()).toBe('processing');

    await waitFor(async () => (await eventState()) === 'done', { what: 'event done', timeoutMs: 20_000 });
    expect(await run('fan.analytics')).toEqual({ state: 'done', attempts: 4, generation: 0 });
    expect(await run('fan.receipt')).toEqual({ state: 'done', attempts: 1, generation: 0 });
    expect(flakyCalls).toBe(4);
    // The receipt's external call: one request, one effect, never re-run by the other's retries.
    expect(sandbox.stats().email).toMatchObject({ requests: 1, applied: 1 });

    // Replay the analytics handler only: a new generation of its run; the receipt run untouched.
    const ops = createOperations({ pool: db.pool, queries: q, queue: ingest.queues });
    const rowId = (await q.getEventByKey(db.pool, 'stripe', 'evt_fan'))!.id;
    const replay = await ops.replay(rowId, { handler: 'fan.analytics', allSteps: true }, 'test', 'recount');
    expect(replay).toMatchObject({ ok: true });
    await waitFor(async () => (await run('fan.analytics'))?.generation === 1 && (await run('fan.analytics'))?.state === 'done', { what: 'analytics replayed' });
    expect(await run('fan.receipt')).toEqual({ state: 'done', attempts: 1, generation: 0 });
    expect(sandbox.stats().email).toMatchObject({ requests: 1, applied: 1 });
    expect(await eventState()).toBe('done');
  } finally {
    await worker.close();
    for (const queue of ingest.queues.shards) await queue.obliterate({ force: true });
    await ingest.close();
  }
});
