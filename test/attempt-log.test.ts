/**
 * The attempt log (migrations/0019, packages/core/src/store/sql/attempt-log.ts): an attempt
 * writes a `run_attempts` row only when it ends other than done; the run row holds the current
 * attempt, and `attempt_history` (what the console and the CLI read) shows both. Each test names
 * the mutant it kills (scripts/mutants/catalog.ts).
 */
import { processJob } from '@oncehook/core';
import { defineHandler } from '@oncehook/sdk';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, seedRun, T } from './helpers/stack.js';

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

interface Logged {
  attempt: number;
  generation: number;
  token: string | null;
  outcome: string | null;
  error: string | null;
  started: boolean;
  ended: boolean;
}

/** The run's attempts as attempt_history shows them, oldest first. */
async function history(runId: number): Promise<Logged[]> {
  const { rows } = await db.pool.query<Logged>(
    `SELECT attempt, generation, lease_token::text AS token, outcome, error, started_at IS NOT NULL AS started, ended_at IS NOT NULL AS ended
       FROM oncehook.attempt_history WHERE run_id = $1 ORDER BY generation, started_at, attempt`,
    [runId],
  );
  return rows;
}

/** The rows the attempts wrote (run_attempts itself). */
async function rowsWritten(runId: number): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.run_attempts WHERE run_id = $1`, [runId]);
  return rows[0]!.n;
}

async function onlyRunId(rowId: number): Promise<number> {
  const runs = await q.getRuns(db.pool, rowId);
  expect(runs).toHaveLength(1);
  return runs[0]!.id;
}

const expire = (runId: number) => db.pool.query(`UPDATE ${T.runs} SET lease_until = now() - interval '1 second' WHERE id = $1`, [runId]);
const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';

// Mutant killed: done-attempt-logged (a done verdict that writes the attempt's row).
it('an attempt that ends done writes no attempt row; the history and the console show it, from the run row', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_done', 'test.log');
  const handler = defineHandler({ name: 'logged', source: 'stripe', type: 'test.log', payload: anything }, async () => {});
  await processJob(engine(db.pool, [handler]), dispatchJob(rowId, 'evt_log_done'));
  const runId = await onlyRunId(rowId);
  expect(await rowsWritten(runId)).toBe(0);
  expect(await history(runId)).toEqual([{ attempt: 1, generation: 0, token: null, outcome: 'done', error: null, started: true, ended: true }]);
  const shown = (await q.showEvent(db.pool, rowId))!.attempts;
  expect(shown).toMatchObject([{ runId, handler: 'logged', attempt: 1, outcome: 'done' }]);
  expect(shown[0]!.endedAt!.getTime()).toBeGreaterThanOrEqual(shown[0]!.startedAt.getTime());
});

it('an attempt that fails writes its row with its error; the next one, done, does not', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_retry', 'test.log');
  let calls = 0;
  const handler = defineHandler({ name: 'flaky', source: 'stripe', type: 'test.log', payload: anything }, async () => {
    calls += 1;
    if (calls === 1) throw new Error('card processor answered 503');
  });
  const e = engine(db.pool, [handler]);
  await processJob(e, dispatchJob(rowId, 'evt_log_retry'));
  const runId = await onlyRunId(rowId);
  expect(await rowsWritten(runId)).toBe(1);
  // The retry's job (what the worker enqueued): the event is processing, its run claimable again.
  await processJob(e, { ...dispatchJob(rowId, 'evt_log_retry'), handler: 'flaky', generation: 0, attempt: 1 });
  expect(calls).toBe(2);
  expect(await rowsWritten(runId)).toBe(1);
  const log = await history(runId);
  expect(log.map(({ attempt, outcome }) => ({ attempt, outcome }))).toEqual([
    { attempt: 1, outcome: 'retry' },
    { attempt: 2, outcome: 'done' },
  ]);
  expect(log[0]!.error).toContain('card processor answered 503');
  expect(log[0]!.ended).toBe(true);
});

// Mutant killed: expired-attempt-unlogged (a lease, or a wait, taking over an expired lease
// without logging the attempt it ends).
it('a lease that takes over an expired one logs the attempt it ended (token and number), then the new one finishes', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_takeover', 'test.log');
  const runId = await seedRun(db.pool, rowId, { handler: 'taken', state: 'received', attempts: 0 });
  expect(await q.acquireRun(db.pool, rowId, 'taken', A, 60_000)).not.toBeNull();
  expect(await history(runId)).toEqual([{ attempt: 1, generation: 0, token: A, outcome: null, error: null, started: true, ended: false }]);
  expect(await rowsWritten(runId)).toBe(0);

  await expire(runId);
  expect(await q.acquireRun(db.pool, rowId, 'taken', B, 60_000)).not.toBeNull();
  expect(await history(runId)).toEqual([
    { attempt: 1, generation: 0, token: A, outcome: null, error: null, started: true, ended: false },
    { attempt: 2, generation: 0, token: B, outcome: null, error: null, started: true, ended: false },
  ]);
  expect(await q.markRunDone(db.pool, runId, B)).toBe(true);
  expect((await history(runId)).map(({ attempt, token, outcome }) => ({ attempt, token, outcome }))).toEqual([
    { attempt: 1, token: A, outcome: null },
    { attempt: 2, token: null, outcome: 'done' },
  ]);
  expect(await rowsWritten(runId)).toBe(1);
});

it('a limited run whose expired lease is taken over to wait for a slot logs the attempt it ended', async () => {
  const busy = await claimStripe(db.pool, 'evt_log_busy', 'test.log');
  await seedRun(db.pool, busy, { handler: 'limited', state: 'processing', leaseToken: B }); // holds the one slot
  const rowId = await claimStripe(db.pool, 'evt_log_waits', 'test.log');
  const runId = await seedRun(db.pool, rowId, { handler: 'limited', state: 'received', attempts: 0 });
  expect(await q.acquireRun(db.pool, rowId, 'limited', A, 60_000)).not.toBeNull();
  await expire(runId);
  const gate = await q.gateAcquire(db.pool, {
    rowId,
    source: 'stripe',
    eventId: 'evt_log_waits',
    handler: 'limited',
    token: '00000000-0000-4000-8000-00000000000c',
    leaseMs: 60_000,
    wait: null,
    concurrency: { limit: 1, key: null },
  });
  expect(gate.kind).toBe('wait');
  expect((await q.getRuns(db.pool, rowId))[0]).toMatchObject({ state: 'received', waiting: 'concurrency' });
  expect(await history(runId)).toEqual([{ attempt: 1, generation: 0, token: A, outcome: null, error: null, started: true, ended: false }]);
  expect(await rowsWritten(runId)).toBe(1);
});

// Mutant killed: reconciler-attempt-unlogged.
it('the reconciler releasing an expired lease logs the attempt that died', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_reconciled', 'test.log');
  const runId = await seedRun(db.pool, rowId, { handler: 'crashed', state: 'received', attempts: 0 });
  expect(await q.acquireRun(db.pool, rowId, 'crashed', A, 60_000)).not.toBeNull();
  await expire(runId);
  expect(await q.releaseExpiredLeases(db.pool, 10)).toMatchObject([{ rowId, handler: 'crashed', attempt: 1 }]);
  expect(await history(runId)).toEqual([{ attempt: 1, generation: 0, token: A, outcome: null, error: null, started: true, ended: false }]);
  expect(await rowsWritten(runId)).toBe(1);
});

// Mutant killed: redrive-attempt-unlogged.
it('a re-drive of a run whose lease expired logs the attempt it ended', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_redriven', 'test.log');
  const runId = await seedRun(db.pool, rowId, { handler: 'hung', state: 'received', attempts: 0 });
  expect(await q.acquireRun(db.pool, rowId, 'hung', A, 60_000)).not.toBeNull();
  await expire(runId);
  expect(await q.redriveRuns(db.pool, rowId, 'hung', 'test', 'hung worker')).toHaveLength(1);
  expect(await history(runId)).toEqual([{ attempt: 1, generation: 0, token: A, outcome: null, error: null, started: true, ended: false }]);
});

// Mutant killed: replay-forgets-done-attempt (the finished generation's done attempt, held only
// by the run row, lost when the replay moves the row on).
it('a replay keeps the done attempt of the generation it ends', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_replayed', 'test.log');
  const handler = defineHandler({ name: 'replayed', source: 'stripe', type: 'test.log', payload: anything }, async () => {});
  const e = engine(db.pool, [handler]);
  await processJob(e, dispatchJob(rowId, 'evt_log_replayed'));
  const runId = await onlyRunId(rowId);
  const moved = await q.replayRun(db.pool, { rowId, handler: 'replayed', reuse: [], actor: 'test', reason: 'again', detail: {} });
  expect(moved).not.toBeNull();
  expect((await history(runId)).map(({ generation, attempt, outcome, ended }) => ({ generation, attempt, outcome, ended }))).toEqual([
    { generation: 0, attempt: 1, outcome: 'done', ended: true },
  ]);
  await processJob(e, { ...dispatchJob(rowId, 'evt_log_replayed'), handler: 'replayed', generation: 1, attempt: 0 });
  expect((await history(runId)).map(({ generation, attempt, outcome }) => ({ generation, attempt, outcome }))).toEqual([
    { generation: 0, attempt: 1, outcome: 'done' },
    { generation: 1, attempt: 1, outcome: 'done' },
  ]);
});

// Mutant killed: done-attempt-upgrade-open (an attempt leased before migration 0019 left open).
it('an attempt leased before migration 0019 (its row written at the lease) is closed by its verdict, done or not', async () => {
  const rowId = await claimStripe(db.pool, 'evt_log_upgrade', 'test.log');
  const done = await seedRun(db.pool, rowId, { handler: 'old-done', state: 'processing', leaseToken: A });
  const retried = await seedRun(db.pool, rowId, { handler: 'old-retry', state: 'processing', leaseToken: B });
  await db.pool.query(`UPDATE ${T.events} SET runs_pending = 2 WHERE id = $1`, [rowId]);
  await db.pool.query(`INSERT INTO oncehook.run_attempts (run_id, lease_token, generation, attempt) VALUES ($1, $2, 0, 1), ($3, $4, 0, 1)`, [done, A, retried, B]);
  expect(await q.markRunDone(db.pool, done, A)).toBe(true);
  expect(await q.releaseRunForRetry(db.pool, retried, B, 'timeout')).toBe(true);
  expect(await history(done)).toEqual([{ attempt: 1, generation: 0, token: A, outcome: 'done', error: null, started: true, ended: true }]);
  expect(await history(retried)).toEqual([{ attempt: 1, generation: 0, token: B, outcome: 'retry', error: 'timeout', started: true, ended: true }]);
});
