/**
 * Round trips per event are what the worker's CPU (and Postgres's) is mostly made of: every
 * statement is a write syscall, a wake-up of a backend and a parse/bind/execute. The count is
 * deterministic, so it is pinned here: a change that adds a statement to the hot path shows up
 * as a failing test, not as a slower bench nobody reads. Counted by the pool's own counters
 * (createPool's onStatement and onRoundTrip: oncehook_db_statements_total and
 * oncehook_db_round_trips_total).
 */
import { paymentSucceeded, waitFor } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { createEngineEvents, processJob } from '@oncehook/core';
import { defineHandler } from '@oncehook/sdk';
import { preparedBaseName } from '../packages/core/src/store/prepared.js';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, exampleHandlers, q, T, testLog, TRUNCATE_ALL } from './helpers/stack.js';

let db: TestDatabase;
let counted: Pool;
let statements = 0;
/** Messages to Postgres that wait for its answer (client.query calls): BEGIN+fence is one, of 2 statements, and so is record+COMMIT. */
let roundTrips = 0;

beforeAll(async () => {
  db = await createTestDatabase();
  counted = createPool(db.url, {
    max: 2,
    onStatement: () => {
      statements += 1;
    },
    onRoundTrip: () => {
      roundTrips += 1;
    },
  });
});
afterAll(async () => {
  await counted.end();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(TRUNCATE_ALL);
});

/** A wallet top-up (the shop's payment handler: one final local step of 3 statements). */
async function topUp(eventId: string): Promise<number> {
  const { data } = paymentSucceeded(eventId, { account: 'acct_rt', amount: 500 }) as { data: Record<string, unknown> };
  return claimStripe(db.pool, eventId, 'payment_intent.succeeded', { data });
}

async function statementsFor(job: Parameters<typeof processJob>[1]): Promise<number> {
  return (await countsFor(job)).statements;
}

async function countsFor(job: Parameters<typeof processJob>[1]): Promise<{ statements: number; roundTrips: number }> {
  const before = { statements, roundTrips };
  const outcome = await processJob(engine(counted, exampleHandlers()), job);
  expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
  return { statements: statements - before.statements, roundTrips: roundTrips - before.roundTrips };
}

it('a dispatch job that carries the type: 5 statements of the engine around the handler’s 3 (dispatch+lease; BEGIN, fence, record+done, COMMIT), in 3 round trips (BEGIN travels with the fence, COMMIT with the record)', async () => {
  const rowId = await topUp('evt_rt_typed');
  // The handler's own statements (ledger account, balance, entry) are 3 of these.
  expect(await countsFor({ ...dispatchJob(rowId, 'evt_rt_typed'), kind: 'stripe', type: 'payment_intent.succeeded' })).toEqual({
    statements: 5 + 3,
    roundTrips: 3 + 3,
  });
});

it('four dispatch jobs at once: their dispatches take 2 statements, not 4 (the first alone, the three that arrived meanwhile in one: dispatch-batcher.ts)', async () => {
  const ids = ['evt_rt_batch_0', 'evt_rt_batch_1', 'evt_rt_batch_2', 'evt_rt_batch_3'];
  const rows = await Promise.all(ids.map(topUp));
  const sizes: number[] = [];
  // One engine, as in a worker: its dispatcher sees the four jobs.
  const events = createEngineEvents(testLog);
  events.on('dispatch:batch', ({ events: n }) => {
    sizes.push(n);
  });
  const shared = engine(counted, exampleHandlers(), {}, { events });
  const before = { statements, roundTrips };
  const outcomes = await Promise.all(ids.map((eventId, i) => processJob(shared, { ...dispatchJob(rows[i]!, eventId), kind: 'stripe', type: 'payment_intent.succeeded' })));
  for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
  expect(sizes).toEqual([1, 3]);
  // 2 dispatches; each run's step as above (BEGIN, fence, 3 ledger statements, record+done, COMMIT).
  expect({ statements: statements - before.statements, roundTrips: roundTrips - before.roundTrips }).toEqual({
    statements: 2 + 4 * (4 + 3),
    roundTrips: 2 + 4 * (2 + 3),
  });
});

// Mutant killed: done-batch-skipped (each run's done its own statement).
it('four runs that finish at once: their dones take 2 statements, not 4 (the first alone, the three that arrived meanwhile in one: run-batchers.ts)', async () => {
  const ids = ['evt_rt_done_0', 'evt_rt_done_1', 'evt_rt_done_2', 'evt_rt_done_3'];
  const rows = await Promise.all(ids.map(topUp));
  // A handler with no step: its run's done is the worker's own statement. All four return together.
  let arrived = 0;
  let release!: () => void;
  const together = new Promise<void>((resolve) => (release = resolve));
  const noStep = defineHandler({ name: 'rt-no-step', source: 'stripe', type: 'payment_intent.succeeded' }, async () => {
    arrived += 1;
    if (arrived === ids.length) release();
    await together;
  });
  const shared = engine(counted, [noStep]);
  const before = statements;
  const outcomes = await Promise.all(ids.map((eventId, i) => processJob(shared, { ...dispatchJob(rows[i]!, eventId), kind: 'stripe', type: 'payment_intent.succeeded' })));
  for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
  // 2 dispatches (1, then 3) and 2 dones (1, then 3).
  expect(statements - before).toBe(2 + 2);
  const { rows: states } = await db.pool.query<{ state: string; pending: number }>(`SELECT state, runs_pending AS pending FROM ${q.schema}.events WHERE id = ANY($1)`, [rows]);
  expect(states).toEqual(ids.map(() => ({ state: 'done', pending: 0 })));
});

// Mutants killed: external-batch-skipped, proof-batch-skipped (each external step's record, or
// its lease proof, its own statement).
it.each([
  { final: false, title: 'and so do their records, then their dones' },
  { final: true, title: 'and so do their final records, each with its run’s done (no done statement)' },
])(
  'four runs whose external steps start and return at once: their lease proofs take 2 statements, not 4, $title (the first alone, the three that arrived meanwhile in one: run-batchers.ts)',
  async ({ final }) => {
    const ids = [0, 1, 2, 3].map((n) => `evt_rt_rec_${final ? 'final_' : ''}${n}`);
    const rows = await Promise.all(ids.map(topUp));
    const barrier = () => {
      let arrived = 0;
      let release!: () => void;
      const all = new Promise<void>((resolve) => (release = resolve));
      return () => {
        arrived += 1;
        if (arrived === ids.length) release();
        return all;
      };
    };
    const handlersIn = barrier();
    const callsReturn = barrier();
    const runsReturn = barrier();
    const notify = defineHandler({ name: 'rt-notify', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
      await handlersIn(); // the lease proofs before the calls go together
      await ctx.step(
        'notify',
        async () => {
          await callsReturn();
          return { sent: true };
        },
        { final },
      );
      if (!final) await runsReturn(); // the dones go together too, so the count below is exact
    });
    const shared = engine(counted, [notify]);
    const before = statements;
    const outcomes = await Promise.all(ids.map((eventId, i) => processJob(shared, { ...dispatchJob(rows[i]!, eventId), kind: 'stripe', type: 'payment_intent.succeeded' })));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    // 2 dispatches (1, then 3); 2 lease proofs, 2 records and, not final, 2 dones (each 1, then 3).
    expect(statements - before).toBe(2 + 2 + 2 + (final ? 0 : 2));
    for (const rowId of rows) expect((await q.getEvent(db.pool, rowId))?.state).toBe('done');
    const { rows: steps } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q.schema}.steps WHERE name = 'notify'`);
    expect(steps[0]!.n).toBe(4);
  },
);

it('a dispatch job from an older version (no type) reads the event first: one statement more', async () => {
  const rowId = await topUp('evt_rt_untyped');
  expect(await countsFor(dispatchJob(rowId, 'evt_rt_untyped'))).toEqual({ statements: 6 + 3, roundTrips: 4 + 3 });
});

it('the job’s type is only a hint: a repeated dispatch job for a finished event runs nothing', async () => {
  const rowId = await topUp('evt_rt_repeat');
  await statementsFor({ ...dispatchJob(rowId, 'evt_rt_repeat'), kind: 'stripe', type: 'payment_intent.succeeded' });
  const again = await processJob(engine(counted, exampleHandlers()), { ...dispatchJob(rowId, 'evt_rt_repeat'), kind: 'stripe', type: 'payment_intent.succeeded' });
  expect(again).toEqual({ kind: 'skipped' });
  // The repeated dispatch statement found the event not `received` and changed nothing.
  expect(await q.getEventByKey(db.pool, 'stripe', 'evt_rt_repeat')).toMatchObject({ state: 'done', runsPending: 0 });
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_entries');
  expect(rows[0]?.n).toBe(1);
});

it('a concurrency-limited handler with a free slot takes its slot, its lease and its recorded steps in one statement: 4 statements for a run with no step (9 when the gate was a transaction: BEGIN, lock, count, lease, COMMIT, and the steps read after it)', async () => {
  const rowId = await topUp('evt_rt_limited');
  const limited = defineHandler({ name: 'rt-limited', source: 'stripe', type: 'payment_intent.succeeded', concurrency: 2 }, async () => {});
  const before = statements;
  const outcome = await processJob(engine(counted, [limited]), { ...dispatchJob(rowId, 'evt_rt_limited'), kind: 'stripe', type: 'payment_intent.succeeded' });
  expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done', handler: 'rt-limited' }] });
  // dispatch (the run created, not leased); the gated lease (lock, count, lease and the
  // recorded steps: one statement); done (no step: one statement); the hand-over (no waiter).
  expect(statements - before).toBe(4);
});

it('an external step: the lease proof before the call, then the record under the fence in one statement: 2 statements in 2 round trips (with the dispatch and the run’s done: 4 in 4; `final`: 3 in 3)', async () => {
  for (const final of [false, true]) {
    const eventId = `evt_rt_external_${final}`;
    const rowId = await topUp(eventId);
    const calls: string[] = [];
    const notify = defineHandler({ name: 'rt-external', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
      await ctx.step(
        'notify',
        async ({ idempotencyKey }) => {
          calls.push(idempotencyKey);
          return { sent: true };
        },
        { final },
      );
    });
    const before = { statements, roundTrips };
    const outcome = await processJob(engine(counted, [notify]), { ...dispatchJob(rowId, eventId), kind: 'stripe', type: 'payment_intent.succeeded' });
    expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done', handler: 'rt-external' }] });
    expect(calls).toHaveLength(1);
    // dispatch+lease (1); lease proof (1); the fenced record, autocommit (1: BEGIN, fence, record
    // and COMMIT were 4 statements in 2 round trips); done (1, or none: `final` records the done
    // with the step).
    expect({ statements: statements - before.statements, roundTrips: roundTrips - before.roundTrips }).toEqual(
      final ? { statements: 3, roundTrips: 3 } : { statements: 4, roundTrips: 4 },
    );
  }
});

it('one local and one external step, the external one final: 5 round trips of the engine around the handler’s own statement (dispatch+lease; BEGIN+fence, record+COMMIT; the proof; the fenced record+done), 8 statements with the handler’s', async () => {
  const rowId = await topUp('evt_rt_local_external');
  const both = defineHandler({ name: 'rt-both', source: 'stripe', type: 'payment_intent.succeeded' }, async (event, ctx) => {
    await ctx.transaction('note', async (tx) => (await tx.query<{ id: string }>('SELECT $1::text AS id', [event.eventId])).rows[0]?.id ?? null);
    await ctx.step('notify', async ({ idempotencyKey }) => ({ sent: idempotencyKey.length }), { final: true });
  });
  const before = { statements, roundTrips };
  const outcome = await processJob(engine(counted, [both]), { ...dispatchJob(rowId, 'evt_rt_local_external'), kind: 'stripe', type: 'payment_intent.succeeded' });
  expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done', handler: 'rt-both' }] });
  // dispatch+lease 1; local: BEGIN+fence 1, the handler's SELECT 1, record+COMMIT 1; proof 1;
  // external: the fenced record with the run's and the event's done, one statement.
  expect({ statements: statements - before.statements, roundTrips: roundTrips - before.roundTrips }).toEqual({ statements: 8, roundTrips: 6 });
});

it('each process counts the statements it sends in oncehook_db_statements_total (ingest and worker)', async () => {
  const { createIngestMetrics, createWorkerMetrics } = await import('@oncehook/shared');
  const { startIngest, startWorker, testPrefix } = await import('./helpers/stack.js');
  const ingestMetrics = createIngestMetrics({ defaultMetrics: false });
  const workerMetrics = createWorkerMetrics({ defaultMetrics: false });
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix, metrics: ingestMetrics });
  const worker = await startWorker({ databaseUrl: db.url, prefix, metrics: workerMetrics });
  try {
    const value = async (metrics: typeof ingestMetrics | typeof workerMetrics) => (await metrics.dbStatements.get()).values[0]?.value ?? 0;
    const [ingestBefore, workerBefore] = [await value(ingestMetrics), await value(workerMetrics)];
    await ingest.pool.query('SELECT 1');
    await worker.pool.query('SELECT 1');
    await worker.pool.query('SELECT 2');
    // At least ours (a periodic refresh of the type labels may add its own meanwhile).
    expect(await value(ingestMetrics)).toBeGreaterThanOrEqual(ingestBefore + 1);
    expect(await value(workerMetrics)).toBeGreaterThanOrEqual(workerBefore + 2);
    expect(await ingestMetrics.registry.metrics()).toContain('oncehook_db_statements_total');
  } finally {
    await worker.close();
    await ingest.queue.obliterate({ force: true });
    await ingest.close();
  }
});

it('every named statement of the hot paths is planned once per connection: after Postgres’s 5 plans for values, it keeps the generic plan (a dispatch was planned again every time until its arrays went behind a CTE)', async () => {
  // One connection, so that pg_prepared_statements (per session) sees every execution.
  const one = createPool(db.url, { max: 1 });
  try {
    const external = defineHandler({ name: 'rt-plan-external', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
      await ctx.step('notify', async () => ({ sent: true }));
    });
    const externalFinal = defineHandler({ name: 'rt-plan-external-final', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
      await ctx.step('notify', async () => ({ sent: true }), { final: true });
    });
    const limited = defineHandler({ name: 'rt-plan-limited', source: 'stripe', type: 'payment_intent.succeeded', concurrency: 2 }, async () => {});
    // Fails its first attempt at each event: the retry's release, then a run job's lease.
    const flaky = defineHandler({ name: 'rt-plan-flaky', source: 'stripe', type: 'payment_intent.succeeded' }, async (event) => {
      if (event.attempt === 1) throw new Error('first attempt fails');
    });
    const paths: [string, readonly Parameters<typeof engine>[1][number][]][] = [
      ['topup', exampleHandlers()],
      ['external', [external]],
      ['external-final', [externalFinal]],
      ['limited', [limited]],
      ['retried', [flaky]],
    ];
    for (let i = 0; i < 8; i += 1) {
      for (const [path, handlers] of paths) {
        const eventId = `evt_rt_plan_${path}_${i}`;
        const rowId = await topUp(eventId);
        // The limited path as the worker runs it: its end hands its slot over leased (leaseNextWaiter; none waits here).
        const outcome = await processJob(
          engine(one, handlers),
          { ...dispatchJob(rowId, eventId), kind: 'stripe', type: 'payment_intent.succeeded' },
          { leaseWakeUp: path === 'limited' },
        );
        if (path !== 'retried') {
          expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
          if (path !== 'topup') continue;
          // A repeated dispatch job from an older version (no type): the event read, then the
          // claimable runs (none: done).
          expect(await processJob(engine(one, handlers), dispatchJob(rowId, eventId))).toEqual({ kind: 'skipped' });
          continue;
        }
        expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'retry' }] });
        const retried = await processJob(engine(one, handlers), { ...dispatchJob(rowId, eventId), handler: 'rt-plan-flaky', generation: 0, attempt: 1 });
        expect(retried).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
      }
      // Dispatches that arrive together: the first alone, the next two in one statement.
      const batchIds = [0, 1, 2].map((n) => `evt_rt_plan_batch_${i}_${n}`);
      const batchRows = await Promise.all(batchIds.map(topUp));
      const shared = engine(one, exampleHandlers());
      const outcomes = await Promise.all(
        batchIds.map((eventId, n) => processJob(shared, { ...dispatchJob(batchRows[n]!, eventId), kind: 'stripe', type: 'payment_intent.succeeded' })),
      );
      for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
      // Runs that finish together (no step: the worker's own done): the first alone, the next two in one statement.
      const doneIds = [0, 1, 2].map((n) => `evt_rt_plan_done_${i}_${n}`);
      const doneRows = await Promise.all(doneIds.map(topUp));
      let arrived = 0;
      let release!: () => void;
      const together = new Promise<void>((resolve) => (release = resolve));
      // (their external steps' calls return together too: the records go the same way.)
      let called = 0;
      let returnCalls!: () => void;
      const calls = new Promise<void>((resolve) => (returnCalls = resolve));
      let entered = 0;
      let startSteps!: () => void;
      const steps = new Promise<void>((resolve) => (startSteps = resolve));
      const noStep = defineHandler({ name: 'rt-plan-no-step', source: 'stripe', type: 'payment_intent.succeeded' }, async (_event, ctx) => {
        entered += 1;
        if (entered === doneIds.length) startSteps();
        await steps;
        await ctx.step('notify', async () => {
          called += 1;
          if (called === doneIds.length) returnCalls();
          await calls;
          return { sent: true };
        });
        arrived += 1;
        if (arrived === doneIds.length) release();
        await together;
      });
      const finishing = engine(one, [noStep]);
      const finished = await Promise.all(
        doneIds.map((eventId, n) => processJob(finishing, { ...dispatchJob(doneRows[n]!, eventId), kind: 'stripe', type: 'payment_intent.succeeded' })),
      );
      for (const outcome of finished) expect(outcome).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    }
    const { rows } = await one.query<{ name: string; generic: number; custom: number }>(
      `SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name LIKE 'oncehook\\_%'`,
    );
    const names = rows.map((r) => preparedBaseName(r.name));
    // The statements these paths run at least 8 times each (a sample that misses one would not
    // check it): 17 of the 21 named ones; not run here: finishUnhandled, renewLease (the lease
    // keeper's timer), markRunFailed and recordStep.
    expect(names).toEqual(
      expect.arrayContaining([
        'dispatchAndLease',
        'dispatchAndLeaseMany',
        'lockLeasedRun',
        'recordFinalStep',
        'renewLeaseAtStep',
        'acquireGatedRun',
        'leaseNextWaiter',
        'releaseRunForRetry',
        'acquireRun',
        'markRunDone',
        'markRunsDone',
        'recordExternalSteps',
        'renewLeasesAtStep',
        'getEvent',
        'acquireClaimableRuns',
        'recordExternalStep',
        'recordFinalExternalStep',
      ]),
    );
    const replanned = rows.filter((r) => r.custom > 5).map((r) => `${r.name}: ${r.custom} plans for values, ${r.generic} generic`);
    expect(replanned).toEqual([]);
  } finally {
    await one.end();
  }
});

it('a freed flow slot handed over: the woken run is leased in the wake-up, so the hand-over and the woken run take 4 statements, where a wake-up and the woken run’s own gate took 5', async () => {
  let release!: () => void;
  const hold = new Promise<void>((resolve) => (release = resolve));
  const limited = defineHandler({ name: 'rt-handed-over', source: 'stripe', type: 'payment_intent.succeeded', concurrency: 1 }, async (event) => {
    if (event.eventId === 'evt_rt_hand_a') await hold;
  });
  const [a, b] = [await topUp('evt_rt_hand_a'), await topUp('evt_rt_hand_b')];
  const e = engine(counted, [limited]);
  const holding = processJob(e, { ...dispatchJob(a, 'evt_rt_hand_a'), kind: 'stripe', type: 'payment_intent.succeeded' }, { leaseWakeUp: true });
  // b waits for the slot a holds (a's lease is committed before its handler is called).
  await waitFor(async () => ((await db.pool.query(`SELECT 1 FROM ${T.runs} WHERE event_row_id = $1 AND state = 'processing'`, [a])).rowCount ? true : null), {
    timeoutMs: 5_000,
    what: 'a holds the slot',
  });
  const waited = await processJob(e, { ...dispatchJob(b, 'evt_rt_hand_b'), kind: 'stripe', type: 'payment_intent.succeeded' });
  expect(waited).toMatchObject({ kind: 'runs', runs: [{ kind: 'waiting', reason: 'concurrency' }] });
  const before = statements;
  release();
  const ended = await holding;
  expect(ended).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
  const wake = ended.kind === 'runs' ? ended.follow[0] : undefined;
  expect(wake?.handedOver).toBeDefined();
  expect(await e.runHandedOver(wake!.handedOver!)).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }], follow: [] });
  // a's done, the wake-up that leases b (with its recorded steps); b's done, its own hand-over (none waits).
  expect(statements - before).toBe(4);
});
