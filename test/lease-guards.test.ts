/**
 * The lease guards, each with a test that fails without it. The mutant each test kills is
 * named in its comment (scripts/mutants/catalog.ts, `npm run mutants`).
 *
 * - the fence while ANOTHER worker holds a LIVE lease (the old tests only checked it after
 *   the run had left `processing`, where the state condition alone gives the same answer);
 * - lease renewal: a handler that outlives its lease five times over is never taken over;
 * - the give-up cap for attempts that died without a verdict;
 * - retry backoff: grows, stays within its jitter, is capped, and the retry job carries it;
 * - a resumed attempt skips recorded steps and hands the same key to the rest.
 */
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { defineHandler, LeaseLostError } from '@oncehook/sdk';
import { jobIdFor, retryDelayMs, processJob } from '@oncehook/core';
import type { RunRow } from '@oncehook/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
const anything = z.unknown();

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function onlyRunOf(rowId: number): Promise<RunRow> {
  const runs = await q.getRuns(db.pool, rowId);
  if (runs.length !== 1) throw new Error(`expected one run, found ${runs.length}`);
  return runs[0]!;
}

async function stepCount(runId: number): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.steps} WHERE run_id = $1`, [runId]);
  return rows[0]?.n ?? -1;
}

describe('the fence, against a live lease', () => {
  // Mutants killed: fence-lock-token (the fence, LOCK_LEASED_RUN, without the token check), fence-done-token
  // (markRunDone without it), fence-retry-token and fence-failed-token (releaseRunForRetry, markRunFailed).
  it('a worker whose lease was taken over, while the new owner still holds it, commits nothing', async () => {
    const rowId = await claimStripe(db.pool, 'evt_live_fence', 'test.fence');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let localRuns = 0;
    let externalRuns = 0;
    const refused: unknown[] = [];

    // Worker A stalls (a GC pause, a hung socket) past its lease, then tries a local and an
    // external step. It catches what they throw, so A's own final markRunDone is exercised too.
    const handler = defineHandler({ name: 'fenced', source: 'stripe', type: 'test.fence', payload: anything }, async (_event, ctx) => {
      entered();
      await gate;
      await ctx.transaction('local', async () => ++localRuns).catch((error: unknown) => refused.push(error));
      await ctx.step('external', async () => ++externalRuns).catch((error: unknown) => refused.push(error));
    });
    // A long lease keeps A's keeper quiet: the lease is expired by hand below.
    const a = processJob(engine(db.pool, [handler]), dispatchJob(rowId, 'evt_live_fence'));
    await inside;
    const runA = await onlyRunOf(rowId);
    const leaseA = runA.leaseToken!;
    expect(leaseA).not.toBeNull();

    // A's lease expires and worker B takes the run over. B is mid-handler elsewhere: its lease
    // is LIVE, the run stays `processing`. Only the token tells A and B apart now.
    await db.pool.query(`UPDATE ${T.runs} SET lease_until = now() - interval '1 second' WHERE id = $1`, [runA.id]);
    const leaseB = '00000000-0000-4000-8000-00000000000b';
    expect(await q.acquireRun(db.pool, rowId, 'fenced', leaseB, 60_000)).not.toBeNull();

    release();
    expect(await a).toMatchObject({ kind: 'runs', runs: [{ kind: 'lease-lost', handler: 'fenced' }] });
    expect(localRuns).toBe(0); // the fence refused before running the step's function
    expect(externalRuns).toBe(0);
    expect(refused).toHaveLength(2);
    for (const error of refused) expect(error).toBeInstanceOf(LeaseLostError);
    expect(await stepCount(runA.id)).toBe(0);

    // Every transition A could still attempt matches nothing.
    expect(await q.markRunDone(db.pool, runA.id, leaseA)).toBe(false);
    expect(await q.releaseRunForRetry(db.pool, runA.id, leaseA, 'A again')).toBe(false);
    expect(await q.markRunFailed(db.pool, runA.id, leaseA, 'A again')).toBe(false);
    expect(await q.renewLease(db.pool, runA.id, leaseA, 60_000)).toBe(false);
    expect(await onlyRunOf(rowId)).toMatchObject({ state: 'processing', leaseToken: leaseB, attempts: 2, lastError: null });
    expect(await q.getEvent(db.pool, rowId)).toMatchObject({ state: 'processing', runsPending: 1, runsFailed: 0 });
  });
});

describe('lease renewal', () => {
  // Mutant killed: renewal-off (the keeper never calls renewLease): the lease expires, the
  // reconciler releases it, the other worker runs the handler a second time.
  it('a handler that runs 5x its lease, with the reconciler and a second worker running, is never taken over', { timeout: 30_000 }, async () => {
    const leaseMs = 1_000;
    let runs = 0;
    const handler = defineHandler({ name: 'slow', source: 'stripe', type: 'test.slow', payload: anything }, async (_event, ctx) => {
      runs += 1;
      await sleep(5 * leaseMs);
      await ctx.transaction('finish', async () => ({ ok: true }), { final: true });
    });
    const prefix = testPrefix();
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    const env = { LEASE_MS: String(leaseMs), RECONCILE_INTERVAL_MS: '100', REQUEUE_AFTER_MS: '300' };
    const workers = [
      await startWorker({ databaseUrl: db.url, prefix, handlers: [handler], env, reconciler: true }),
      await startWorker({ databaseUrl: db.url, prefix, handlers: [handler], env, reconciler: true }),
    ];
    try {
      expect((await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_slow'), type: 'test.slow' }))).status).toBe(202);
      const done = await waitFor(
        async () => {
          const r = await q.getEventByKey(db.pool, 'stripe', 'evt_slow');
          return r?.state === 'done' ? r : null;
        },
        { timeoutMs: 20_000, what: 'slow event done' },
      );
      const run = await onlyRunOf(done.id);
      expect(run.attempts).toBe(1);
      expect(runs).toBe(1);
      expect(run.lastError).toBeNull();
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await ingest.close();
    }
  });
});

describe('the give-up cap', () => {
  // Mutant killed: cap-off (no `attempts > maxAttempts` check before the handler).
  it('a run whose earlier attempts all died without a verdict ends failed, without running the handler', async () => {
    const rowId = await claimStripe(db.pool, 'evt_cap', 'test.cap');
    let runs = 0;
    const handler = defineHandler({ name: 'capped', source: 'stripe', type: 'test.cap', payload: anything }, async () => {
      runs += 1;
    });
    const deps = engine(db.pool, [handler], { retry: { maxAttempts: 5, backoffMs: 20 } });
    // Dispatch once, then pretend five attempts were each killed mid-handler: the reconciler
    // released them, none recorded a verdict.
    await db.pool.query(`UPDATE ${T.events} SET state = 'processing', runs_pending = 1 WHERE id = $1`, [rowId]);
    await db.pool.query(`INSERT INTO ${T.runs} (event_row_id, handler, attempts, last_error) VALUES ($1, 'capped', 5, 'lease expired during attempt 5 (worker crashed or hung)')`, [
      rowId,
    ]);
    const outcome = await processJob(deps, { ...dispatchJob(rowId, 'evt_cap'), handler: 'capped', attempt: 5 });
    expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'failed', handler: 'capped' }] });
    expect(runs).toBe(0);
    const run = await onlyRunOf(rowId);
    expect(run).toMatchObject({ state: 'failed', attempts: 6, leaseToken: null });
    expect(run.lastError).toBe('gave up after 5 attempts; last error: lease expired during attempt 5 (worker crashed or hung)');
    expect(await q.getEvent(db.pool, rowId)).toMatchObject({ state: 'failed', runsPending: 0, runsFailed: 1 });
  });
});

describe('retry backoff', () => {
  // Mutant killed: backoff-zero (the run retry delay is 0).
  it('grows as base x 2^(n-1), within its jitter range [0.5, 1] x that, capped at 10 minutes', () => {
    const base = 1_000;
    for (let n = 1; n <= 9; n += 1) {
      const nominal = base * 2 ** (n - 1);
      const samples = Array.from({ length: 200 }, () => retryDelayMs({ maxAttempts: 10, backoffMs: base }, n));
      expect(Math.min(...samples), `attempt ${n}`).toBeGreaterThanOrEqual(nominal * 0.5);
      expect(Math.max(...samples), `attempt ${n}`).toBeLessThanOrEqual(nominal);
      expect(new Set(samples).size, `attempt ${n} is jittered`).toBeGreaterThan(1);
    }
    for (const n of [11, 20, 60]) {
      const samples = Array.from({ length: 50 }, () => retryDelayMs({ maxAttempts: 10, backoffMs: base }, n));
      expect(Math.max(...samples)).toBeLessThanOrEqual(600_000);
      expect(Math.min(...samples)).toBeGreaterThanOrEqual(300_000);
    }
  });

  it('the retry job of a failed attempt is queued with that delay', async () => {
    const prefix = testPrefix();
    const handler = defineHandler({ name: 'fails-once', source: 'stripe', type: 'test.fails_once', payload: anything }, async () => {
      throw new Error('transient');
    });
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    const worker = await startWorker({ databaseUrl: db.url, prefix, handlers: [handler], env: { RETRY_BACKOFF_MS: '8000' } });
    try {
      await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_backoff'), type: 'test.fails_once' }));
      const retry = await waitFor(() => worker.queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_backoff', handler: 'fails-once', attempt: 1 })), {
        what: 'the retry job',
      });
      expect(await retry.getState()).toBe('delayed');
      expect(retry.opts.delay).toBeGreaterThanOrEqual(4_000);
      expect(retry.opts.delay).toBeLessThanOrEqual(8_000);
      const event = await q.getEventByKey(db.pool, 'stripe', 'evt_backoff');
      expect((await onlyRunOf(event!.id)).state).toBe('received');
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
    const rowId = await claimStripe(db.pool, 'evt_resume', 'test.resume');
    const calls: { step: string; attempt: number; key: string }[] = [];
    const handler = defineHandler({ name: 'resumer', source: 'stripe', type: 'test.resume', payload: anything }, async (event, ctx) => {
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
      await ctx.transaction('finish', async () => null, { final: true });
    });
    const deps = engine(db.pool, [handler]);
    expect(await processJob(deps, dispatchJob(rowId, 'evt_resume'))).toMatchObject({ runs: [{ kind: 'retry', attempt: 1 }] });
    expect(await processJob(deps, { ...dispatchJob(rowId, 'evt_resume'), handler: 'resumer', attempt: 1 })).toMatchObject({ runs: [{ kind: 'done' }] });

    expect(calls.map((c) => `${c.step}@${c.attempt}`)).toEqual(['charge@1', 'email@1', 'email@2']);
    const emails = calls.filter((c) => c.step === 'email');
    expect(emails[1]?.key).toBe(emails[0]?.key);
    expect(emails[0]?.key).not.toBe(calls[0]?.key); // per step
    expect(await stepCount((await onlyRunOf(rowId)).id)).toBe(3);
  });
});
