/**
 * The lease guards, each with a test that fails without it. The mutant each test kills is
 * named in its comment (scripts/mutants/catalog.ts, `npm run mutants`).
 *
 * - the fence while ANOTHER worker holds a LIVE lease (the old tests only checked it after
 *   the row had left `processing`, where the state condition alone gives the same answer);
 * - lease renewal: a handler that outlives its lease five times over is never taken over;
 * - the give-up cap for attempts that died without a verdict;
 * - retry backoff: grows, stays within its jitter, is capped, and the retry job carries it;
 * - a resumed attempt skips recorded steps and hands the same key to the rest.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LeaseLostError, jobIdFor, noFaults, queries, type EventRow } from '@oncehook/shared';
import { HandlerRegistry } from '../apps/worker/src/handlers';
import { processEvent } from '../apps/worker/src/process-event';
import { retryDelayMs } from '../apps/worker/src/worker';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { startIngest, startWorker, testLog, testPrefix } from './helpers/stack';
import { deliver, paymentSucceeded, signStripe } from './helpers/stripe';
import { waitFor } from './helpers/wait';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('TRUNCATE webhook_events CASCADE');
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function claim(eventId: string, type = 'payment_intent.succeeded'): Promise<number> {
  const payload = { ...paymentSucceeded(eventId), type };
  const result = await queries.claimEvent(db.pool, { provider: 'stripe', kind: 'stripe', eventId, type, signedAt: new Date(), rawBody: JSON.stringify(payload), payload, meta: {} });
  if (result.outcome !== 'new') throw new Error('expected a new claim');
  return result.rowId;
}

async function row(rowId: number): Promise<EventRow> {
  const r = await queries.getEvent(db.pool, rowId);
  if (!r) throw new Error(`row ${rowId} missing`);
  return r;
}

async function stepCount(rowId: number): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_event_steps WHERE event_row_id = $1', [rowId]);
  return rows[0]?.n ?? -1;
}

describe('the fence, against a live lease', () => {
  // Mutants killed: fence-lock-token (lockLeasedEvent without the token check), fence-done-token
  // (markDone without it), fence-retry-token and fence-failed-token (releaseForRetry, markFailed).
  it('a worker whose lease was taken over, while the new owner still holds it, commits nothing', async () => {
    const rowId = await claim('evt_live_fence');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let localRuns = 0;
    let externalRuns = 0;
    const refused: unknown[] = [];

    // Worker A stalls (a GC pause, a hung socket) past its lease, then tries a local and an
    // external step. It catches what they throw, so A's own final markDone is exercised too.
    const registry = new HandlerRegistry().on('stripe', 'payment_intent.succeeded', async (_event, ctx) => {
      entered();
      await gate;
      await ctx.transaction('local', async () => ++localRuns).catch((error: unknown) => refused.push(error));
      await ctx.step('external', async () => ++externalRuns).catch((error: unknown) => refused.push(error));
    });
    // A long lease keeps A's keeper quiet: the lease is expired by hand below.
    const settings = { leaseMs: 60_000, maxAttempts: 5 };
    const a = processEvent({ pool: db.pool, registry, log: testLog, faults: noFaults, settings }, { rowId, provider: 'stripe', eventId: 'evt_live_fence', attempt: 0 });
    await inside;
    const leaseA = (await row(rowId)).leaseToken;
    expect(leaseA).not.toBeNull();

    // A's lease expires and worker B takes the event over. B is mid-handler elsewhere: its
    // lease is LIVE, the row stays `processing`. Only the token tells A and B apart now.
    await db.pool.query(`UPDATE webhook_events SET lease_until = now() - interval '1 second' WHERE id = $1`, [rowId]);
    const leaseB = '00000000-0000-4000-8000-00000000000b';
    expect(await queries.acquireLease(db.pool, rowId, leaseB, 60_000)).not.toBeNull();

    release();
    expect(await a).toEqual({ kind: 'lease-lost', rowId, type: 'payment_intent.succeeded' });
    expect(localRuns).toBe(0); // the fence refused before running the step's function
    expect(externalRuns).toBe(0);
    expect(refused).toHaveLength(2);
    for (const error of refused) expect(error).toBeInstanceOf(LeaseLostError);
    expect(await stepCount(rowId)).toBe(0);

    // Every transition A could still attempt matches nothing.
    expect(await queries.markDone(db.pool, rowId, leaseA!)).toBe(false);
    expect(await queries.releaseForRetry(db.pool, rowId, leaseA!, 'A again')).toBe(false);
    expect(await queries.markFailed(db.pool, rowId, leaseA!, 'A again')).toBe(false);
    expect(await queries.renewLease(db.pool, rowId, leaseA!, 60_000)).toBe(false);
    expect(await row(rowId)).toMatchObject({ state: 'processing', leaseToken: leaseB, attempts: 2, lastError: null });
  });
});

describe('lease renewal', () => {
  // Mutant killed: renewal-off (the keeper never calls renewLease): the lease expires, the
  // reconciler releases it, the other worker runs the handler a second time.
  it('a handler that runs 5x its lease, with the reconciler and a second worker running, is never taken over', { timeout: 30_000 }, async () => {
    const leaseMs = 1_000;
    let runs = 0;
    const registry = new HandlerRegistry().on('stripe', 'test.slow', async (_event, ctx) => {
      runs += 1;
      await sleep(5 * leaseMs);
      await ctx.transaction('finish', async () => ({ ok: true }), { completesEvent: true });
    });
    const prefix = testPrefix();
    const ingest = await startIngest({ pool: db.pool, prefix });
    const settings = { leaseMs, reconciler: { intervalMs: 100, requeueAfterMs: 300, batchSize: 100 } };
    const workers = [startWorker({ pool: db.pool, prefix, registry, settings }), startWorker({ pool: db.pool, prefix, registry, settings })];
    workers.forEach((w) => w.reconciler.run());
    try {
      expect((await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_slow'), type: 'test.slow' }))).status).toBe(202);
      const done = await waitFor(async () => {
        const r = await queries.getEventByKey(db.pool, 'stripe', 'evt_slow');
        return r?.state === 'done' ? r : null;
      }, { timeoutMs: 20_000, what: 'slow event done' });
      expect(done.attempts).toBe(1);
      expect(runs).toBe(1);
      expect(done.lastError).toBeNull();
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await ingest.close();
    }
  });
});

describe('the give-up cap', () => {
  // Mutant killed: cap-off (no `attempts > maxAttempts` check before the handler).
  it('a received row whose earlier attempts all died without a verdict ends failed, without running the handler', async () => {
    const rowId = await claim('evt_cap');
    // Five attempts, each killed mid-handler: the reconciler released them, none recorded a verdict.
    await db.pool.query(`UPDATE webhook_events SET attempts = 5, last_error = 'lease expired during attempt 5 (worker crashed or hung)' WHERE id = $1`, [rowId]);
    let runs = 0;
    const registry = new HandlerRegistry().on('stripe', 'payment_intent.succeeded', async () => {
      runs += 1;
    });
    const outcome = await processEvent(
      { pool: db.pool, registry, log: testLog, faults: noFaults, settings: { leaseMs: 60_000, maxAttempts: 5 } },
      { rowId, provider: 'stripe', eventId: 'evt_cap', attempt: 5 },
    );
    expect(outcome).toMatchObject({ kind: 'failed', rowId });
    expect(runs).toBe(0);
    const after = await row(rowId);
    expect(after).toMatchObject({ state: 'failed', attempts: 6, leaseToken: null });
    expect(after.lastError).toBe('gave up after 5 attempts; last error: lease expired during attempt 5 (worker crashed or hung)');
  });
});

describe('retry backoff', () => {
  // Mutant killed: backoff-zero (retryDelayMs returns 0).
  it('grows as base x 2^(n-1), within its jitter range [0.5, 1] x that, capped at 10 minutes', () => {
    const base = 1_000;
    for (let n = 1; n <= 9; n += 1) {
      const nominal = base * 2 ** (n - 1);
      const samples = Array.from({ length: 200 }, () => retryDelayMs(n, base));
      expect(Math.min(...samples), `attempt ${n}`).toBeGreaterThanOrEqual(nominal * 0.5);
      expect(Math.max(...samples), `attempt ${n}`).toBeLessThanOrEqual(nominal);
      expect(new Set(samples).size, `attempt ${n} is jittered`).toBeGreaterThan(1);
    }
    for (const n of [11, 20, 60]) {
      const samples = Array.from({ length: 50 }, () => retryDelayMs(n, base));
      expect(Math.max(...samples)).toBeLessThanOrEqual(600_000);
      expect(Math.min(...samples)).toBeGreaterThanOrEqual(300_000);
    }
  });

  it('the retry job of a failed attempt is queued with that delay', async () => {
    const prefix = testPrefix();
    const registry = new HandlerRegistry().on('stripe', 'test.fails_once', async () => {
      throw new Error('transient');
    });
    const ingest = await startIngest({ pool: db.pool, prefix });
    const worker = startWorker({ pool: db.pool, prefix, registry, settings: { retryBackoffMs: 8_000 } });
    try {
      await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_backoff'), type: 'test.fails_once' }));
      const retry = await waitFor(() => worker.queue.getJob(jobIdFor('stripe', 'evt_backoff', 1)), { what: 'the retry job' });
      expect(await retry.getState()).toBe('delayed');
      expect(retry.opts.delay).toBeGreaterThanOrEqual(4_000);
      expect(retry.opts.delay).toBeLessThanOrEqual(8_000);
      expect((await queries.getEventByKey(db.pool, 'stripe', 'evt_backoff'))?.state).toBe('received');
    } finally {
      await worker.close();
      await ingest.close();
    }
  });
});

describe('resumed attempts', () => {
  // Mutants killed: skip-external-step (a recorded external step is called again) and
  // key-includes-attempt (a key that changes per attempt).
  it('a resumed attempt skips recorded steps and hands the same key to the step it repeats', async () => {
    const rowId = await claim('evt_resume', 'test.resume');
    const calls: { step: string; attempt: number; key: string }[] = [];
    const registry = new HandlerRegistry().on('stripe', 'test.resume', async (event, ctx) => {
      const charge = await ctx.step('charge', async ({ idempotencyKey }) => {
        calls.push({ step: 'charge', attempt: event.attempt, key: idempotencyKey });
        return { chargeId: `ch_${event.attempt}` };
      });
      expect(charge).toEqual({ chargeId: 'ch_1' }); // the recorded result, on every attempt
      await ctx.step('email', async ({ idempotencyKey }) => {
        calls.push({ step: 'email', attempt: event.attempt, key: idempotencyKey });
        if (event.attempt === 1) throw new Error('email API timed out after sending (the answer was lost)');
        return { emailId: 'em_1' };
      });
      await ctx.transaction('finish', async () => null, { completesEvent: true });
    });
    const deps = { pool: db.pool, registry, log: testLog, faults: noFaults, settings: { leaseMs: 60_000, maxAttempts: 5 } };
    expect(await processEvent(deps, { rowId, provider: 'stripe', eventId: 'evt_resume', attempt: 0 })).toMatchObject({ kind: 'retry', attempt: 1 });
    expect(await processEvent(deps, { rowId, provider: 'stripe', eventId: 'evt_resume', attempt: 1 })).toMatchObject({ kind: 'done' });

    expect(calls.map((c) => `${c.step}@${c.attempt}`)).toEqual(['charge@1', 'email@1', 'email@2']);
    const emails = calls.filter((c) => c.step === 'email');
    expect(emails[1]?.key).toBe(emails[0]?.key);
    expect(emails[0]?.key).not.toBe(calls[0]?.key); // per step
    expect(await stepCount(rowId)).toBe(3);
  });
});
