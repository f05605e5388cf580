/**
 * Group commit of dispatches (packages/core/src/dispatch-batcher.ts), against real Postgres:
 * dispatches that arrive while one is in flight go together in one statement, and each gets
 * exactly what the one-event statement would have given it.
 */
import { randomUUID } from 'node:crypto';
import { createPool, isDatabaseUnavailableError, type Pool } from '@oncehook/shared';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createDispatchBatcher } from '../packages/core/src/dispatch-batcher.js';
import type { DispatchRequest } from '../packages/core/src/store/queries.js';
import { createTestDatabase, type TestDatabase, untilLockWaiters } from './helpers/db.js';
import { claimStripe, q, T, TRUNCATE_ALL } from './helpers/stack.js';

let db: TestDatabase;
let counted: Pool;
let statements = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  counted = createPool(db.url, { max: 4, onStatement: () => (statements += 1) });
});
afterAll(async () => {
  await counted.end();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(TRUNCATE_ALL);
  await db.pool.query(`DELETE FROM ${q.schema}.pauses`);
});

/** A batcher on the counted pool; its batches' sizes in `sizes`, its statements counted from now. */
function batcher(queries: Parameters<typeof createDispatchBatcher>[0]['queries'] = q, pool: Pool = counted, maxBatch?: number) {
  const sizes: number[] = [];
  statements = 0;
  return { sizes, dispatcher: createDispatchBatcher({ pool, queries, leaseMs: 60_000, maxBatch, onBatch: (n) => sizes.push(n) }) };
}

function request(rowId: number, handlers: string[], deferred: string[] = []): DispatchRequest {
  return { rowId, runs: handlers.map((handler) => ({ handler, token: randomUUID(), deferred: deferred.includes(handler) })), traceParent: null };
}

async function events(n: number, prefix: string): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < n; i += 1) ids.push(await claimStripe(db.pool, `${prefix}_${i}`, 'payment_intent.succeeded'));
  return ids;
}

it('dispatches that arrive while one is in flight go together in one statement; each gets its own event and runs, leased with its own tokens', async () => {
  const [first, a, b, c] = await events(4, 'evt_db_together');
  await q.pause(db.pool, 'handler', 'paused-one', 'test', 'held back');
  const { sizes, dispatcher } = batcher();
  const requests = [request(first!, ['ledger']), request(a!, ['ledger', 'email']), request(b!, ['ledger', 'limited'], ['limited']), request(c!, ['ledger', 'paused-one'])];
  const results = await Promise.all(requests.map((r) => dispatcher.dispatch(r)));
  // The first found none in flight and went alone; the three that came meanwhile went together.
  expect(sizes).toEqual([1, 3]);
  expect(statements).toBe(2);

  for (const [i, r] of requests.entries()) {
    const result = results[i]!;
    expect(result.event).toMatchObject({ id: r.rowId, state: 'processing', runsPending: r.runs.length });
    const byHandler = new Map(result.runs.map((run) => [run.handler, run]));
    expect([...byHandler.keys()].sort()).toEqual(r.runs.map((run) => run.handler).sort());
    for (const run of r.runs) {
      const created = byHandler.get(run.handler)!;
      expect(created.eventRowId).toBe(r.rowId);
      if (run.deferred) expect(created).toMatchObject({ state: 'received', leaseToken: null, attempts: 0, waiting: null });
      else if (run.handler === 'paused-one') expect(created).toMatchObject({ state: 'received', leaseToken: null, waiting: 'paused' });
      else expect(created).toMatchObject({ state: 'processing', leaseToken: run.token, attempts: 1 });
    }
  }
  // What the database holds agrees: every leased run has its attempt open under its token (in
  // its run row: a dispatch writes no attempt row, migrations/0019).
  const { rows } = await db.pool.query<{ token: string }>(
    `SELECT lease_token::text AS token FROM ${q.schema}.attempt_history WHERE ended_at IS NULL AND started_at IS NOT NULL ORDER BY 1`,
  );
  expect((await db.pool.query(`SELECT 1 FROM ${q.schema}.run_attempts`)).rowCount).toBe(0);
  const leased = requests.flatMap((r) => r.runs.filter((run) => !run.deferred && run.handler !== 'paused-one').map((run) => run.token));
  expect(rows.map((row) => row.token)).toEqual(leased.sort());
  const { rows: states } = await db.pool.query<{ state: string; pending: number }>(`SELECT state, runs_pending AS pending FROM ${T.events} WHERE id = ANY($1) ORDER BY id`, [
    requests.map((r) => r.rowId),
  ]);
  expect(states).toEqual(requests.map((r) => ({ state: 'processing', pending: r.runs.length })));
});

it('an event that is not `received` any more is null in a batch, and the others are dispatched', async () => {
  const [first, done, other] = await events(3, 'evt_db_not_received');
  await db.pool.query(`UPDATE ${T.events} SET state = 'done' WHERE id = $1`, [done]);
  const { sizes, dispatcher } = batcher();
  const results = await Promise.all([first!, done!, other!].map((id) => dispatcher.dispatch(request(id, ['ledger']))));
  expect(sizes).toEqual([1, 2]);
  expect(results[1]).toBeNull();
  expect(results[2]?.event.id).toBe(other);
  const { rows } = await db.pool.query(`SELECT 1 FROM ${T.runs} WHERE event_row_id = $1`, [done]);
  expect(rows).toHaveLength(0);
});

it('the same event twice at once is dispatched once: the repeat waits for the next statement and finds it dispatched', async () => {
  const [first, twice, other] = await events(3, 'evt_db_twice');
  const { sizes, dispatcher } = batcher();
  const results = await Promise.all([
    dispatcher.dispatch(request(first!, ['ledger'])),
    dispatcher.dispatch(request(twice!, ['ledger', 'email'])),
    dispatcher.dispatch(request(twice!, ['ledger', 'email'])),
    dispatcher.dispatch(request(other!, ['ledger'])),
  ]);
  // Never one event twice in a statement: its runs would be counted twice.
  expect(sizes).toEqual([1, 2, 1]);
  expect(results[1]?.runs).toHaveLength(2);
  expect(results[2]).toBeNull();
  const { rows } = await db.pool.query<{ pending: number; runs: number }>(
    `SELECT e.runs_pending AS pending, (SELECT count(*)::int FROM ${T.runs} r WHERE r.event_row_id = e.id) AS runs FROM ${T.events} e WHERE e.id = $1`,
    [twice],
  );
  expect(rows[0]).toEqual({ pending: 2, runs: 2 });
});

it('a batch holds at most maxBatch events; the rest wait for the next statement', async () => {
  const ids = await events(6, 'evt_db_max');
  const { sizes, dispatcher } = batcher(q, counted, 2);
  const results = await Promise.all(ids.map((id) => dispatcher.dispatch(request(id, ['ledger']))));
  expect(sizes).toEqual([1, 2, 2, 1]);
  expect(statements).toBe(4);
  expect(results.map((r) => r?.event.id)).toEqual(ids);
  const { rows } = await db.pool.query<{ state: string }>(`SELECT state FROM ${T.events} ORDER BY id`);
  expect(rows.map((r) => r.state)).toEqual(ids.map(() => 'processing'));
});

it('a batch that fails is retried one event at a time: only the event at fault fails, the others are dispatched', async () => {
  const [first, good, bad, alsoGood] = await events(4, 'evt_db_fault');
  const { sizes, dispatcher } = batcher();
  const poison: DispatchRequest = { rowId: bad!, runs: [{ handler: 'ledger', token: 'not-a-uuid' }], traceParent: null };
  const results = await Promise.allSettled([
    dispatcher.dispatch(request(first!, ['ledger'])),
    dispatcher.dispatch(request(good!, ['ledger'])),
    dispatcher.dispatch(poison),
    dispatcher.dispatch(request(alsoGood!, ['ledger'])),
  ]);
  expect(sizes).toEqual([1, 3]);
  // The first alone, the batch (rolled back), then its three events one by one.
  expect(statements).toBe(1 + 1 + 3);
  expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  expect(String((results[2] as PromiseRejectedResult).reason)).toMatch(/uuid/);
  const { rows } = await db.pool.query<{ id: string; state: string }>(`SELECT id::text, state FROM ${T.events} ORDER BY id`);
  expect(rows.map((r) => r.state)).toEqual(['processing', 'processing', 'received', 'processing']);
});

it('an unavailable database fails every dispatch of a batch at once, without trying each again', async () => {
  const calls = { one: 0, many: 0 };
  const queries = {
    dispatchAndLease: (...args: Parameters<typeof q.dispatchAndLease>) => {
      calls.one += 1;
      return q.dispatchAndLease(...args);
    },
    dispatchAndLeaseMany: (...args: Parameters<typeof q.dispatchAndLeaseMany>) => {
      calls.many += 1;
      return q.dispatchAndLeaseMany(...args);
    },
  };
  // Nothing listens on port 9: every connection is refused.
  const down = createPool('postgres://postgres@127.0.0.1:9/nothing', { max: 2, connectionTimeoutMillis: 2_000 });
  try {
    const { sizes, dispatcher } = batcher(queries, down);
    const results = await Promise.allSettled([1, 2, 3, 4].map((id) => dispatcher.dispatch(request(id, ['ledger']))));
    expect(sizes).toEqual([1, 3]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect(isDatabaseUnavailableError((r as PromiseRejectedResult).reason)).toBe(true);
    }
    expect(calls).toEqual({ one: 1, many: 1 });
  } finally {
    await down.end();
  }
});

it('two batches holding the same events in opposite orders wait for each other instead of deadlocking: each event dispatched once', async () => {
  // Two workers' batches share events (a job repeated on both). A third transaction holds the
  // middle event, so both statements are inside their locking when it lets go: locked in
  // argument order, one would hold the low half and the other the high half, each waiting
  // for the other (Postgres aborts one: 40P01). Locked in id order, the second waits behind
  // the first, then finds the events dispatched.
  const ids = await events(40, 'evt_db_order');
  const holder = await db.pool.connect();
  const [a, b] = [await db.pool.connect(), await db.pool.connect()];
  try {
    await holder.query('BEGIN');
    await holder.query(`SELECT id FROM ${T.events} WHERE id = $1 FOR UPDATE`, [ids[20]]);
    const ascending = q.dispatchAndLeaseMany(
      a,
      ids.map((id) => request(id, ['ledger'])),
      60_000,
    );
    const descending = q.dispatchAndLeaseMany(
      b,
      [...ids].reverse().map((id) => request(id, ['ledger', 'email'])),
      60_000,
    );
    // Both are waiting on the held row (or on each other) before it is let go.
    await untilLockWaiters(db.pool, 2, 'both batches blocked');
    await holder.query('COMMIT');
    const [first, second] = await Promise.all([ascending, descending]);
    // All forty dispatched, each by exactly one of the two statements.
    expect(first.size + second.size).toBe(40);
    expect([...first.keys(), ...second.keys()].sort((x, y) => x - y)).toEqual(ids);
    const { rows } = await db.pool.query<{ state: string; pending: number; runs: number }>(
      `SELECT e.state, e.runs_pending AS pending, (SELECT count(*)::int FROM ${T.runs} r WHERE r.event_row_id = e.id) AS runs FROM ${T.events} e ORDER BY e.id`,
    );
    for (const row of rows) {
      expect(row.state).toBe('processing');
      expect(row.runs).toBe(row.pending);
    }
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    for (const client of [holder, a, b]) client.release();
  }
});
