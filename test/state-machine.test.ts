/**
 * The worker's state machine and the fence, in process, over real Postgres and Redis.
 */
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { defineHandler, PermanentError } from '@oncehook/sdk';
import type { EventRow, RunRow } from '@oncehook/core';
import { LEASE_LOST, processJob } from '@oncehook/core';
import { commitWith, createPool } from '@oncehook/shared';
import { fixture } from '@oncehook/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import {
  claimStripe,
  dispatchJob,
  engine,
  exampleHandlers,
  ledgerSummary,
  q,
  seedRun,
  startIngest,
  startWorker,
  TRUNCATE_ALL,
  testPrefix,
  type IngestHandle,
} from './helpers/stack.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(TRUNCATE_ALL);
});

async function onlyRunOf(rowId: number): Promise<RunRow> {
  const runs = await q.getRuns(db.pool, rowId);
  if (runs.length !== 1) throw new Error(`expected one run, found ${runs.length}`);
  return runs[0]!;
}

describe('the fence', () => {
  it('a worker whose lease expired and was taken over cannot commit its step or mark done', async () => {
    const rowId = await claimStripe(db.pool, 'evt_fence', 'payment_intent.succeeded', paymentSucceeded('evt_fence', { account: 'cus_sm', amount: 500 }));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let stepRuns = 0;

    // Worker A: its handler stalls (a GC pause, a hung socket) past its lease. It has the same
    // name as the example's handler, as two workers running one deployment would.
    const slow = defineHandler({ name: 'shop.payments', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
      entered();
      await gate;
      await ctx.transaction(
        'credit',
        async (tx) => {
          stepRuns += 1;
          await tx.query(`INSERT INTO ledger_accounts (id, balance_cents) VALUES ('cus_sm', 500)`);
          return null;
        },
        { final: true },
      );
    });
    const a = processJob(engine(db.pool, [slow]), dispatchJob(rowId, 'evt_fence'));
    await inside;
    const leaseA = (await onlyRunOf(rowId)).leaseToken;

    // A's lease expires; worker B (the example's real handler) takes the run over and finishes it.
    await db.pool.query(`UPDATE oncehook.handler_runs SET lease_until = now() - interval '1 second' WHERE event_row_id = $1`, [rowId]);
    const b = await processJob(engine(db.pool, exampleHandlers()), { ...dispatchJob(rowId, 'evt_fence'), handler: 'shop.payments', attempt: 1 });
    expect(b).toMatchObject({ kind: 'runs', runs: [{ kind: 'done', handler: 'shop.payments' }] });
    const afterB = await onlyRunOf(rowId);
    expect(afterB).toMatchObject({ state: 'done', attempts: 2, leaseToken: null });

    // A wakes up: its step must not run, nor its done transition land.
    release();
    expect(await a).toMatchObject({ kind: 'runs', runs: [{ kind: 'lease-lost', handler: 'shop.payments' }] });
    expect(stepRuns).toBe(0);
    expect(await q.markRunDone(db.pool, afterB.id, leaseA!)).toBe(false);
    expect((await ledgerSummary(db.pool)).entries).toBe(1);
    expect((await onlyRunOf(rowId)).finishedAt?.getTime()).toBe(afterB.finishedAt?.getTime());
    expect((await q.getEvent(db.pool, rowId))?.state).toBe('done');
  });

  it('a takeover waits for an in-flight step transaction and then sees the run done', async () => {
    // The fence holds the run's row lock until COMMIT: a concurrent takeover cannot slip in
    // between the lease check and the commit.
    const rowId = await claimStripe(db.pool, 'evt_fence_lock', 't');
    const token = '00000000-0000-4000-8000-000000000001';
    // A 1 ms lease: expired by the time anyone else looks, yet our fence still holds the lock.
    const runId = await seedRun(db.pool, rowId, { handler: 'h', state: 'processing', leaseToken: token, leaseMs: 1 });
    const tx = await db.pool.connect();
    await tx.query('BEGIN');
    expect((await tx.query(q.fenceStatement(runId, token))).rows[0]).toEqual({ generation: 0, stop: false });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The takeover sees an expired lease, and blocks on our row lock.
    let tookOver: unknown;
    const takeover = (async () => {
      const other = await db.pool.connect();
      try {
        await other.query(`SET lock_timeout = '5s'`);
        tookOver = await q.acquireRun(other, rowId, 'h', '00000000-0000-4000-8000-000000000002', 60_000);
      } finally {
        other.release();
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(tookOver).toBeUndefined(); // still blocked
    expect(await q.markRunDone(tx, runId, token)).toBe(true);
    await tx.query('COMMIT');
    tx.release();
    await takeover;
    expect(tookOver).toBeNull(); // re-checked after our commit: the run is done
    expect((await q.getEvent(db.pool, rowId))?.state).toBe('done');
  });

  // Mutant killed: final-record-lease-lost-silent (the record returns 0 rows instead of failing).
  it('a final record whose lease is no longer ours fails (OH001) and the COMMIT sent with it is skipped: the step’s writes and its record roll back', async () => {
    // The record and COMMIT travel in one round trip (local-step.ts): 0 rows would let that
    // COMMIT land the handler's writes with no `done`. The guard cannot fail under the fence;
    // here it is made to, with a token that is not the lease's.
    const rowId = await claimStripe(db.pool, 'evt_record_lost', 't');
    const runId = await seedRun(db.pool, rowId, { handler: 'h', state: 'processing', leaseToken: '00000000-0000-4000-8000-000000000003', leaseMs: 60_000 });
    const tx = await db.pool.connect();
    try {
      await tx.query('BEGIN');
      await tx.query("INSERT INTO ledger_accounts (id) VALUES ('acct_record_lost')");
      const record = q.finalStepRecord({ runId, generation: 0, name: 'credit', kind: 'local', result: null, idempotencyKey: null }, '00000000-0000-4000-8000-000000000004');
      await expect(commitWith(tx, record)).rejects.toMatchObject({ code: LEASE_LOST });
      await tx.query('ROLLBACK');
    } finally {
      tx.release();
    }
    const { rows } = await db.pool.query("SELECT 1 FROM ledger_accounts WHERE id = 'acct_record_lost'");
    expect(rows).toHaveLength(0);
    expect((await db.pool.query('SELECT 1 FROM oncehook.steps WHERE run_id = $1', [runId])).rows).toHaveLength(0);
    expect((await onlyRunOf(rowId)).state).toBe('processing');
  });
});

describe('a final external step', () => {
  /** Handlers ending with an external step, `final` or not; the pool counts the statements sent. */
  function ending(final: boolean, onCall: (runId: number) => Promise<void> = async () => {}) {
    const calls: string[] = [];
    const handler = defineHandler({ name: `ends-external-${final}`, source: 'stripe', type: 'invoice.paid' }, async (_event, ctx) => {
      await ctx.transaction('record', async () => ({ ok: true }));
      await ctx.step(
        'charge',
        async ({ idempotencyKey }) => {
          calls.push(idempotencyKey);
          await onCall((await db.pool.query<{ id: number }>(`SELECT id FROM oncehook.handler_runs WHERE handler = $1`, [`ends-external-${final}`])).rows[0]!.id);
          return { charged: true };
        },
        { final },
      );
    });
    let statements = 0;
    const pool = createPool(db.url, {
      max: 4,
      onStatement: () => {
        statements += 1;
      },
    });
    return { calls, handler, pool, statements: () => statements };
  }

  it('its record, the run done and the event done commit in the record statement after the call: one statement fewer than a separate done, the call made once', async () => {
    const counted: number[] = [];
    for (const final of [false, true]) {
      const { calls, handler, pool, statements } = ending(final);
      try {
        const rowId = await claimStripe(db.pool, `evt_final_ext_${final}`, 'invoice.paid');
        const before = statements();
        expect(await engine(pool, [handler]).processJob(dispatchJob(rowId, `evt_final_ext_${final}`))).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
        counted.push(statements() - before);
        expect(calls).toHaveLength(1);
        expect((await q.getEvent(db.pool, rowId))?.state).toBe('done');
        const run = await onlyRunOf(rowId);
        expect(run).toMatchObject({ state: 'done', leaseToken: null });
        const { rows } = await db.pool.query('SELECT name, kind, idempotency_key AS key FROM oncehook.steps WHERE run_id = $1 ORDER BY name', [run.id]);
        expect(rows).toEqual([
          { name: 'charge', kind: 'external', key: calls[0] },
          { name: 'record', kind: 'local', key: null },
        ]);
      } finally {
        await pool.end();
      }
    }
    expect(counted[1]).toBe(counted[0]! - 1);
  });

  // Mutant killed: external-record-unfenced (the record without the token: a takeover during
  // the call, after the proof, is not seen).
  it('a takeover during the call, after the proof, final or not: the record commits nothing, the run stays with its new holder', async () => {
    for (const final of [false, true]) {
      const { calls, handler, pool } = ending(final, async (runId) => {
        await db.pool.query(`UPDATE oncehook.handler_runs SET lease_token = '00000000-0000-4000-8000-000000000009' WHERE id = $1`, [runId]);
      });
      try {
        const eventId = `evt_final_ext_lost_${final}`;
        const rowId = await claimStripe(db.pool, eventId, 'invoice.paid');
        expect(await engine(pool, [handler]).processJob(dispatchJob(rowId, eventId))).toMatchObject({ kind: 'runs', runs: [{ kind: 'lease-lost' }] });
        expect(calls).toHaveLength(1);
        const run = await onlyRunOf(rowId);
        expect(run).toMatchObject({ state: 'processing', leaseToken: '00000000-0000-4000-8000-000000000009' });
        expect((await db.pool.query("SELECT 1 FROM oncehook.steps WHERE run_id = $1 AND name = 'charge'", [run.id])).rows).toHaveLength(0);
        expect((await q.getEvent(db.pool, rowId))?.state).toBe('processing');
      } finally {
        await pool.end();
      }
    }
  });
});

describe('the lease proof before an external call', () => {
  it('a lease with half or more left is read, not written; one with less is renewed to a full lease before the call', async () => {
    const seen: { step: string; xmin: string; untilMs: number }[] = [];
    const look = async (step: string, runId: number) => {
      const { rows } = await db.pool.query<{ xmin: string; until: Date }>('SELECT xmin::text, lease_until AS until FROM oncehook.handler_runs WHERE id = $1', [runId]);
      seen.push({ step, xmin: rows[0]!.xmin, untilMs: rows[0]!.until.getTime() });
    };
    const runIdOf = async () => (await db.pool.query<{ id: number }>("SELECT id FROM oncehook.handler_runs WHERE handler = 'proves'")).rows[0]!.id;
    const proves = defineHandler({ name: 'proves', source: 'stripe', type: 'invoice.paid' }, async (_event, ctx) => {
      await ctx.step('first', async () => void (await look('first', await runIdOf())));
      await ctx.step('second', async () => {
        const runId = await runIdOf();
        await look('second', runId);
        // Less than half of the 60 s lease left: the next proof must renew it.
        await db.pool.query("UPDATE oncehook.handler_runs SET lease_until = clock_timestamp() + interval '10 seconds' WHERE id = $1", [runId]);
        await look('shortened', runId);
      });
      await ctx.step('third', async () => void (await look('third', await runIdOf())));
    });
    const rowId = await claimStripe(db.pool, 'evt_lease_proof', 'invoice.paid');
    expect(await engine(db.pool, [proves], { leaseMs: 60_000 }).processJob(dispatchJob(rowId, 'evt_lease_proof'))).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    const [first, second, shortened, third] = seen;
    // Between the first call and the second: the first's record, then the second's proof.
    expect(second).toEqual({ ...first, step: 'second' });
    expect(third!.untilMs - shortened!.untilMs).toBeGreaterThan(40_000);
    expect(third!.xmin).not.toBe(shortened!.xmin);
  });
});

describe('dispatch', () => {
  // Mutant killed: dispatch-twice (the dispatch does not check that the event is still received).
  it('a repeated dispatch job, after the run finished, changes nothing', async () => {
    const rowId = await claimStripe(db.pool, 'evt_dispatch_twice', 'payment_intent.succeeded', paymentSucceeded('evt_dispatch_twice', { account: 'cus_d', amount: 10 }));
    const deps = engine(db.pool, exampleHandlers());
    expect(await processJob(deps, dispatchJob(rowId, 'evt_dispatch_twice'))).toMatchObject({ runs: [{ kind: 'done' }] });
    expect(await processJob(deps, dispatchJob(rowId, 'evt_dispatch_twice'))).toEqual({ kind: 'skipped' });
    expect(await q.getEvent(db.pool, rowId)).toMatchObject({ state: 'done', runsPending: 0, runsFailed: 0 });
    expect((await onlyRunOf(rowId)).attempts).toBe(1);
    expect((await ledgerSummary(db.pool)).entries).toBe(1);
  });
});

describe('handler outcomes', () => {
  let ingest: IngestHandle;
  let worker: Awaited<ReturnType<typeof startWorker>>;
  const calls = new Map<string, number>();
  const stepOneRuns = new Map<string, number>();
  const anything = z.unknown();

  beforeAll(async () => {
    const prefix = testPrefix();
    const handlers = [
      ...exampleHandlers(),
      defineHandler({ name: 'test.flaky', source: 'stripe', type: 'test.flaky', payload: anything }, async (event, ctx) => {
        const n = (calls.get(event.eventId) ?? 0) + 1;
        calls.set(event.eventId, n);
        await ctx.transaction('one', async () => {
          stepOneRuns.set(event.eventId, (stepOneRuns.get(event.eventId) ?? 0) + 1);
          return { at: n };
        });
        if (n < 3) throw new Error(`flaky failure ${n}`);
      }),
      defineHandler({ name: 'test.always-fails', source: 'stripe', type: 'test.always_fails', payload: anything }, async () => {
        throw new Error('downstream is broken');
      }),
      defineHandler({ name: 'test.permanent', source: 'stripe', type: 'test.permanent', payload: anything }, async () => {
        throw new PermanentError('customer record is invalid');
      }),
      // Two handlers of one event, each with its own retry policy over the worker's MAX_ATTEMPTS=4.
      defineHandler({ name: 'test.patient', source: 'stripe', type: 'test.two_policies', payload: anything, retries: { maxAttempts: 6, backoffMs: 5 } }, async () => {
        throw new Error('still down');
      }),
      defineHandler({ name: 'test.impatient', source: 'stripe', type: 'test.two_policies', payload: anything, retries: { maxAttempts: 2 } }, async () => {
        throw new Error('still down');
      }),
    ];
    ingest = await startIngest({ databaseUrl: db.url, prefix });
    worker = await startWorker({ databaseUrl: db.url, prefix, handlers, env: { MAX_ATTEMPTS: '4', RETRY_BACKOFF_MS: '10' } });
  });
  afterAll(async () => {
    await worker.close();
    await ingest.close();
  });

  async function finished(eventId: string): Promise<{ event: EventRow; run: RunRow | undefined }> {
    return waitFor(
      async () => {
        const event = await q.getEventByKey(db.pool, 'stripe', eventId);
        if (!event || (event.state !== 'done' && event.state !== 'failed')) return null;
        return { event, run: (await q.getRuns(db.pool, event.id))[0] };
      },
      { what: `${eventId} finished` },
    );
  }

  it('a transient error is retried; a committed step is not re-run on the retry', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_flaky'), type: 'test.flaky' }));
    const { event, run } = await finished('evt_flaky');
    expect(event.state).toBe('done');
    expect(run).toMatchObject({ handler: 'test.flaky', state: 'done', attempts: 3, lastError: 'Error: flaky failure 2' });
    expect(calls.get('evt_flaky')).toBe(3);
    expect(stepOneRuns.get('evt_flaky')).toBe(1);
  });

  it('retries exhausted -> failed, with the error recorded', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_broken'), type: 'test.always_fails' }));
    const { event, run } = await finished('evt_broken');
    expect(event.state).toBe('failed');
    expect(run).toMatchObject({ state: 'failed', attempts: 4, lastError: 'attempt 4/4 failed: Error: downstream is broken' });
  });

  it("each handler's own retries: 6 attempts for one, 2 for the other, on the same event (the worker's MAX_ATTEMPTS is 4)", async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_two_policies'), type: 'test.two_policies' }));
    const runs = await waitFor(
      async () => {
        const event = await q.getEventByKey(db.pool, 'stripe', 'evt_two_policies');
        return event?.state === 'failed' ? q.getRuns(db.pool, event.id) : null;
      },
      { what: 'evt_two_policies failed' },
    );
    const byHandler = Object.fromEntries(runs.map((run) => [run.handler, run]));
    expect(byHandler['test.patient']).toMatchObject({ state: 'failed', attempts: 6, lastError: 'attempt 6/6 failed: Error: still down' });
    expect(byHandler['test.impatient']).toMatchObject({ state: 'failed', attempts: 2, lastError: 'attempt 2/2 failed: Error: still down' });
  });

  it('a PermanentError -> failed on the first attempt', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_perm'), type: 'test.permanent' }));
    const { run } = await finished('evt_perm');
    expect(run).toMatchObject({ state: 'failed', attempts: 1, lastError: 'PermanentError: customer record is invalid' });
  });

  it('an unknown event type is recorded as done with a note (UNHANDLED_EVENTS=done), with no run', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_unknown'), type: 'customer.created' }));
    const { event, run } = await finished('evt_unknown');
    expect(event.state).toBe('done');
    expect(run).toBeUndefined();
    expect(event.note).toMatch(/no handler registered for stripe \(stripe\) "customer.created"; recorded without effects/);
  });

  it('the example credits the ledger once and completes the run in the same transaction', async () => {
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_ledger', { account: 'cus_l', amount: 777 })));
    const { event, run } = await finished('evt_ledger');
    expect(event.state).toBe('done');
    const { rows } = await db.pool.query('SELECT name, kind, result FROM oncehook.steps WHERE run_id = $1', [run!.id]);
    expect(rows).toEqual([{ name: 'credit-ledger', kind: 'local', result: { entryId: expect.any(Number), accountId: 'cus_l', amount: 777 } }]);
    expect((await ledgerSummary(db.pool)).perEvent.get('evt_ledger')).toBe(1);
  });

  it("Stripe CLI's own payment_intent.succeeded fixture (no customer, no metadata) is credited to the guest account, done", async () => {
    // The shape `stripe trigger payment_intent.succeeded` sends (@oncehook/testkit fixture).
    const payment: Record<string, unknown> = { ...fixture('stripe', 'payment_intent.succeeded'), id: 'evt_guest' };
    expect((payment.data as { object: { customer: unknown; metadata: unknown } }).object).toMatchObject({ customer: null, metadata: {}, description: '(created by Stripe CLI)' });
    await deliver(ingest.url, signStripe(payment));
    const { event } = await finished('evt_guest');
    expect(event.state).toBe('done');
    const { rows } = await db.pool.query(`SELECT balance_cents::int AS b FROM ledger_accounts WHERE id = 'guest'`);
    expect(rows).toEqual([{ b: 2000 }]);
  });

  it('a malformed payment (no amount) is dead-lettered, not retried', async () => {
    const bad = paymentSucceeded('evt_bad_pi');
    const object = bad.data.object as Record<string, unknown>;
    delete object.amount;
    delete object.amount_received;
    await deliver(ingest.url, signStripe(bad));
    const { event, run } = await finished('evt_bad_pi');
    expect(event.state).toBe('failed');
    expect(run).toMatchObject({ state: 'failed', attempts: 1 });
    expect(run?.lastError).toMatch(/PermanentError: payment_intent.succeeded needs an integer amount/);
    expect((await ledgerSummary(db.pool)).entries).toBe(0);
  });
});
