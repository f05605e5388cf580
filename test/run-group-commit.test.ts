/**
 * Group commit of the worker's statements about runs (packages/core/src/run-batchers.ts), against
 * real Postgres: the run's done (MARK_RUNS_DONE) and external steps' records, final ones with
 * their run's and event's done (RECORD_EXTERNAL_STEPS). Requests that arrive while one is in flight go
 * together in one statement, each fenced by its own token; a done moves each event's counters by
 * its runs done there; the lease proofs before external calls (RENEW_LEASES_AT_STEP) read where the lease has the call's time left and renew where not. (What every group commit does, one key per batch, the bound, a failed
 * batch retried one at a time, is tested on the dispatch's: test/dispatch-batcher.test.ts.)
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createRunBatchers } from '../packages/core/src/run-batchers.js';
import { createTestDatabase, type TestDatabase, untilLockWaiters } from './helpers/db.js';
import { claimStripe, q, T, TRUNCATE_ALL } from './helpers/stack.js';

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

/** An event dispatched with one leased run per handler: the runs' ids and tokens by handler. */
async function dispatched(eventId: string, handlers: string[]): Promise<{ rowId: number; runs: Map<string, { runId: number; token: string }> }> {
  const rowId = await claimStripe(db.pool, eventId, 'payment_intent.succeeded');
  const result = await q.dispatchAndLease(
    db.pool,
    rowId,
    handlers.map((handler) => ({ handler, token: randomUUID() })),
    60_000,
    null,
  );
  if (!result) throw new Error(`${eventId} was not dispatched`);
  return { rowId, runs: new Map(result.runs.map((run) => [run.handler, { runId: run.id, token: run.leaseToken! }])) };
}

/** The record of run's external step `notify`, its call made for `generation` (0: the run's own). */
function step(run: { runId: number }, generation = 0) {
  return { runId: run.runId, generation, name: 'notify', kind: 'external' as const, result: { sent: run.runId }, idempotencyKey: `key-${run.runId}` };
}

async function eventState(rowId: number): Promise<{ state: string; pending: number; finished: boolean }> {
  const { rows } = await db.pool.query<{ state: string; pending: number; finished: boolean }>(
    `SELECT state, runs_pending AS pending, finished_at IS NOT NULL AS finished FROM ${T.events} WHERE id = $1`,
    [rowId],
  );
  return rows[0]!;
}

// Mutant killed: done-batch-counts-once (an event's counters moved by one for all its runs in the batch).
it('dones that arrive while one is in flight go together in one statement: each run done under its own token, two handlers of one event counted twice, a lost lease answered false', async () => {
  const first = await dispatched('evt_done_first', ['ledger']);
  const both = await dispatched('evt_done_both', ['ledger', 'email']);
  const half = await dispatched('evt_done_half', ['ledger', 'email']);
  const lost = await dispatched('evt_done_lost', ['ledger']);
  // Another worker took `lost` over: the token this worker holds is stale.
  const lostRun = lost.runs.get('ledger')!;
  await db.pool.query(`UPDATE ${T.runs} SET lease_token = $2 WHERE id = $1`, [lostRun.runId, randomUUID()]);

  const sizes: number[] = [];
  const finisher = createRunBatchers({ pool: db.pool, queries: q, onBatch: (_statement, n) => sizes.push(n) });
  const answers = await Promise.all([
    finisher.markDone(first.runs.get('ledger')!),
    finisher.markDone(both.runs.get('ledger')!),
    finisher.markDone(both.runs.get('email')!),
    finisher.markDone(half.runs.get('ledger')!),
    finisher.markDone(lostRun),
  ]);
  expect(sizes).toEqual([1, 4]);
  expect(answers).toEqual([true, true, true, true, false]);
  expect(await eventState(first.rowId)).toEqual({ state: 'done', pending: 0, finished: true });
  expect(await eventState(both.rowId)).toEqual({ state: 'done', pending: 0, finished: true });
  expect(await eventState(half.rowId)).toEqual({ state: 'processing', pending: 1, finished: false });
  expect(await eventState(lost.rowId)).toEqual({ state: 'processing', pending: 1, finished: false });
  expect((await q.getRuns(db.pool, lost.rowId))[0]).toMatchObject({ state: 'processing' });
  // Each done attempt shows in the log, from its run row; none wrote an attempt row.
  const { rows } = await db.pool.query<{ n: number; rowsWritten: number }>(
    `SELECT (SELECT count(*)::int FROM ${q.schema}.attempt_history WHERE outcome = 'done') AS n, (SELECT count(*)::int FROM ${q.schema}.run_attempts) AS "rowsWritten"`,
  );
  expect(rows[0]).toEqual({ n: 4, rowsWritten: 0 });
});

it('an attempt leased before migration 0019 is closed by a batched done too', async () => {
  const old = await dispatched('evt_done_old', ['ledger']);
  const other = await dispatched('evt_done_other', ['ledger']);
  const run = old.runs.get('ledger')!;
  await db.pool.query(`UPDATE ${T.runs} SET attempt_started_at = NULL WHERE id = $1`, [run.runId]);
  await db.pool.query(`INSERT INTO ${q.schema}.run_attempts (run_id, lease_token, generation, attempt) VALUES ($1, $2, 0, 1)`, [run.runId, run.token]);
  expect(await q.markRunsDone(db.pool, [run, other.runs.get('ledger')!])).toEqual(new Set([run.runId, other.runs.get('ledger')!.runId]));
  const { rows } = await db.pool.query(`SELECT outcome, ended_at IS NOT NULL AS ended FROM ${q.schema}.run_attempts WHERE run_id = $1`, [run.runId]);
  expect(rows).toEqual([{ outcome: 'done', ended: true }]);
});

it('two batches finishing runs of the same events in opposite orders wait for each other instead of deadlocking: every event done once', async () => {
  // Two workers each hold one handler's runs of the same 40 events (fan-out), and finish them in
  // one batch each, in opposite orders. A third transaction holds the middle event, so both
  // statements are inside their locking when it lets go.
  const events = [];
  for (let i = 0; i < 40; i += 1) events.push(await dispatched(`evt_done_order_${i}`, ['ledger', 'email']));
  const holder = await db.pool.connect();
  const [a, b] = [await db.pool.connect(), await db.pool.connect()];
  try {
    await holder.query('BEGIN');
    await holder.query(`SELECT id FROM ${T.events} WHERE id = $1 FOR UPDATE`, [events[20]!.rowId]);
    const ascending = q.markRunsDone(
      a,
      events.map((e) => e.runs.get('ledger')!),
      // (the runs of one worker; the other's below, reversed)
    );
    const descending = q.markRunsDone(
      b,
      [...events].reverse().map((e) => e.runs.get('email')!),
    );
    await untilLockWaiters(db.pool, 2, 'both batches blocked');
    await holder.query('COMMIT');
    const [first, second] = await Promise.all([ascending, descending]);
    expect(first.size + second.size).toBe(80);
    const { rows } = await db.pool.query<{ state: string; pending: number }>(`SELECT state, runs_pending AS pending FROM ${T.events} ORDER BY id`);
    expect(rows).toEqual(events.map(() => ({ state: 'done', pending: 0 })));
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    for (const client of [holder, a, b]) client.release();
  }
});

// Mutant killed: external-batch-unfenced (a batched record written for a run another worker took over).
it("external steps' records that arrive together go in one statement: each under its own run's fence and generation; a run taken over gets nothing written", async () => {
  const runs = [];
  for (let i = 0; i < 5; i += 1) runs.push((await dispatched(`evt_rec_${i}`, ['notify'])).runs.get('notify')!);
  const [first, ok, taken, otherGeneration, last] = runs as [(typeof runs)[0], (typeof runs)[0], (typeof runs)[0], (typeof runs)[0], (typeof runs)[0]];
  // Another worker took `taken` over during its call: this worker's token is stale.
  await db.pool.query(`UPDATE ${T.runs} SET lease_token = $2 WHERE id = $1`, [taken.runId, randomUUID()]);
  const sizes: number[] = [];
  const recorder = createRunBatchers({ pool: db.pool, queries: q, onBatch: (_statement, n) => sizes.push(n) });
  const answers = await Promise.all([
    recorder.record({ step: step(first), token: first.token, final: false }),
    recorder.record({ step: step(ok), token: ok.token, final: false }),
    recorder.record({ step: step(taken), token: taken.token, final: false }),
    // A call made for a generation the run is not at any more (replayed meanwhile): fence held, nothing recorded.
    recorder.record({ step: step(otherGeneration, 1), token: otherGeneration.token, final: false }),
    recorder.record({ step: step(last), token: last.token, final: false }),
  ]);
  expect(sizes).toEqual([1, 4]);
  expect(answers).toEqual([{ stop: false, recorded: true }, { stop: false, recorded: true }, null, { stop: false, recorded: false }, { stop: false, recorded: true }]);
  const { rows } = await db.pool.query<{ runId: number; key: string; result: unknown }>(
    `SELECT run_id::int AS "runId", idempotency_key AS key, result FROM ${T.steps} ORDER BY run_id`,
  );
  expect(rows).toEqual([first, ok, last].map((r) => ({ runId: r.runId, key: `key-${r.runId}`, result: { sent: r.runId } })));
});

// Mutant killed: external-final-batch-not-done (a batched final record that leaves its run and event processing).
it('final external records that arrive together go in the same statement as the others: each run done with its record, two handlers of one event counted twice, nothing for a run taken over or a call for another generation', async () => {
  const single = await dispatched('evt_final_single', ['notify']);
  const pair = await dispatched('evt_final_pair', ['ledger', 'notify']);
  const mixed = await dispatched('evt_final_mixed', ['notify']);
  const lost = await dispatched('evt_final_lost', ['notify']);
  const replayed = await dispatched('evt_final_replayed', ['notify']);
  const lostRun = lost.runs.get('notify')!;
  await db.pool.query(`UPDATE ${T.runs} SET lease_token = $2 WHERE id = $1`, [lostRun.runId, randomUUID()]);
  const sizes: number[] = [];
  const recorder = createRunBatchers({ pool: db.pool, queries: q, onBatch: (_statement, n) => sizes.push(n) });
  const record = (run: { runId: number; token: string }, final: boolean, generation = 0) => recorder.record({ step: step(run, generation), token: run.token, final });
  const answers = await Promise.all([
    record(single.runs.get('notify')!, true),
    record(pair.runs.get('ledger')!, true),
    record(pair.runs.get('notify')!, true),
    // Not final: recorded, its run still processing (the worker's done follows).
    record(mixed.runs.get('notify')!, false),
    record(lostRun, true),
    record(replayed.runs.get('notify')!, true, 1),
  ]);
  expect(sizes).toEqual([1, 5]);
  expect(answers).toEqual([
    { stop: false, recorded: true },
    { stop: false, recorded: true },
    { stop: false, recorded: true },
    { stop: false, recorded: true },
    null,
    { stop: false, recorded: false },
  ]);
  expect(await eventState(single.rowId)).toEqual({ state: 'done', pending: 0, finished: true });
  expect(await eventState(pair.rowId)).toEqual({ state: 'done', pending: 0, finished: true });
  for (const open of [mixed, lost, replayed]) {
    expect(await eventState(open.rowId)).toEqual({ state: 'processing', pending: 1, finished: false });
    expect((await q.getRuns(db.pool, open.rowId))[0]).toMatchObject({ state: 'processing' });
  }
  const { rows } = await db.pool.query<{ runId: number }>(`SELECT run_id::int AS "runId" FROM ${T.steps} ORDER BY run_id`);
  const recorded = [single.runs.get('notify')!, pair.runs.get('ledger')!, pair.runs.get('notify')!, mixed.runs.get('notify')!].map((r) => r.runId);
  expect(rows.map((r) => r.runId)).toEqual(recorded.sort((a, b) => a - b));
  // Each final run's done attempt shows in the log, from its run row.
  const history = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q.schema}.attempt_history WHERE outcome = 'done'`);
  expect(history.rows[0]!.n).toBe(3);
});

// Mutants killed: proof-batch-never-renews, proof-batch-unfenced.
it("lease proofs that arrive together go in one statement: a read where the lease has the call's time left, a renewal where not, no for a run taken over, stop for a paused handler", async () => {
  const first = (await dispatched('evt_proof_first', ['notify'])).runs.get('notify')!;
  const fresh = (await dispatched('evt_proof_fresh', ['notify'])).runs.get('notify')!;
  const short = (await dispatched('evt_proof_short', ['notify'])).runs.get('notify')!;
  const taken = (await dispatched('evt_proof_taken', ['notify'])).runs.get('notify')!;
  const stopped = (await dispatched('evt_proof_stopped', ['stopping'])).runs.get('stopping')!;
  // `short` has 2 s of its lease left, under the 30 s the call needs: it must be renewed.
  await db.pool.query(`UPDATE ${T.runs} SET lease_until = clock_timestamp() + interval '2 seconds' WHERE id = $1`, [short.runId]);
  await db.pool.query(`UPDATE ${T.runs} SET lease_token = $2 WHERE id = $1`, [taken.runId, randomUUID()]);
  await q.pause(db.pool, 'handler', 'stopping', 'test', 'stop at the next step', true);
  try {
    const sizes: number[] = [];
    const prover = createRunBatchers({ pool: db.pool, queries: q, onBatch: (_statement, n) => sizes.push(n) });
    const prove = (run: { runId: number; token: string }) => prover.prove({ runId: run.runId, token: run.token, leaseMs: 60_000, needMs: 30_000 });
    const answers = await Promise.all([prove(first), prove(fresh), prove(short), prove(taken), prove(stopped)]);
    expect(sizes).toEqual([1, 4]);
    expect(answers).toEqual([{ stop: false, renewed: false }, { stop: false, renewed: false }, { stop: false, renewed: true }, null, { stop: true, renewed: false }]);
    const { rows } = await db.pool.query<{ left: number }>(`SELECT extract(epoch FROM lease_until - clock_timestamp())::float8 AS left FROM ${T.runs} WHERE id = $1`, [
      short.runId,
    ]);
    expect(rows[0]!.left).toBeGreaterThan(50);
  } finally {
    await db.pool.query(`DELETE FROM ${q.schema}.pauses`);
  }
});
