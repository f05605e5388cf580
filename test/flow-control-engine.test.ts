/**
 * Flow control in process, over real Postgres (docs/flow-control.md): the gate's decisions and
 * their fences, forced interleavings of two workers at the last slot, the pause at each lease
 * statement, the circuit breaker, a key function's mistakes, and the admin API's pause.
 * The multi-process proofs (3 workers, kill -9, restarts) are in flow-control.test.ts.
 */
import { paymentSucceeded, startSandbox, waitFor } from '@oncehook/harness';
import { createOperations, createReconciler, closeQueueConnection, enqueueEvent, flowLockKey, type FollowUp, type JobOutcome } from '@oncehook/core';
import { buildWorker, loadWorkerConfig } from 'oncehook';
import { defineHandler, HandlerDefinitionError, type Handler } from '@oncehook/sdk';
import { createFaults, createWorkerMetrics } from '@oncehook/shared';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, T, TRUNCATE_ALL, testEnv, testLog, testPrefix, testQueues, testQueueStore } from './helpers/stack.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`${TRUNCATE_ALL}; TRUNCATE oncehook.pauses, oncehook.rate_windows, oncehook.handler_health, ${T.actions}`);
});

const TYPE = 'payment_intent.succeeded';
let n = 0;
async function newEvent(customer = 'cus_1'): Promise<{ rowId: number; eventId: string }> {
  n += 1;
  const eventId = `evt_flow_${n}`;
  return { rowId: await claimStripe(db.pool, eventId, TYPE, paymentSucceeded(eventId, { account: customer })), eventId };
}

function runsOf(outcome: JobOutcome) {
  if (outcome.kind !== 'runs') throw new Error(`expected runs, got ${outcome.kind}`);
  return outcome.runs;
}
function followOf(outcome: JobOutcome): FollowUp[] {
  return outcome.kind === 'runs' ? outcome.follow : [];
}

async function runStates(handler: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM ${T.runs} WHERE handler = $1 GROUP BY state`, [handler]);
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

async function run(rowId: number, handler: string) {
  return (
    await db.pool.query<{ state: string; waiting: string | null; attempts: number; waits: number }>(
      `SELECT state, waiting, attempts, waits FROM ${T.runs} WHERE event_row_id = $1 AND handler = $2`,
      [rowId, handler],
    )
  ).rows[0] as { state: string; waiting: string | null; attempts: number; waits: number };
}

/**
 * A handler whose runs stay in it until `release()`: how many are in it now (`state.entered`)
 * and the most at once (`state.most`).
 */
function heldHandler(options: Parameters<typeof defineHandler>[0]) {
  let release!: () => void;
  const hold = new Promise<void>((resolve) => (release = resolve));
  const state = { entered: 0, most: 0 };
  const handler = defineHandler(options, async () => {
    state.entered += 1;
    state.most = Math.max(state.most, state.entered);
    await hold;
    state.entered -= 1;
  });
  return { handler, state, release: () => release() };
}

describe('concurrency', () => {
  it('the last slot, taken by two workers at once: both queue for its lock inside their lease statement; the one after counts (in a snapshot taken after the lock) the lease the first committed, and waits (not an attempt) until the slot frees', async () => {
    const held = heldHandler({ name: 'one-at-a-time', source: 'stripe', type: TYPE, concurrency: 1 });
    const a = await newEvent();
    const b = await newEvent();
    // The test holds the slot's lock, so both gates' statements start (their own snapshots
    // taken) and then queue for it: the second to get it must count the lease the first
    // committed after that snapshot. Without the lock, or with the count in the statement's
    // snapshot, both would count 0 and both lease.
    const holder = await db.pool.connect();
    const lockKey = flowLockKey('oncehook', 'one-at-a-time', null);
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey]);
    const e1 = engine(db.pool, [held.handler]);
    const e2 = engine(db.pool, [held.handler]);
    const first = e1.processJob(dispatchJob(a.rowId, a.eventId));
    const second = e2.processJob(dispatchJob(b.rowId, b.eventId));
    try {
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          );
          return rows[0]!.n === 2 ? true : null;
        },
        { timeoutMs: 10_000, what: 'both gates queued for the slot lock' },
      );
      expect(held.state.entered).toBe(0);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    // The first to get the lock leases and runs (held in the handler); the other counted it and waits.
    const bothRan = waitFor(async () => (held.state.entered === 2 ? ('both' as const) : null), { timeoutMs: 5_000, what: 'one of the gates to return' });
    const waitedFor = await Promise.race([first.then(() => 'a' as const), second.then(() => 'b' as const), bothRan]);
    if (waitedFor === 'both') held.release(); // both took the last slot: let them finish before failing
    expect(waitedFor).not.toBe('both');
    bothRan.catch(() => {}); // one returned: this poll times out unread
    const waiter = waitedFor === 'a' ? a : b;
    const waited = await (waitedFor === 'a' ? first : second);
    expect(runsOf(waited)).toEqual([{ kind: 'waiting', handler: 'one-at-a-time', reason: 'concurrency' }]);
    expect(await run(waiter.rowId, 'one-at-a-time')).toMatchObject({ state: 'received', waiting: 'concurrency', attempts: 0, waits: 1 });
    // It looked at the slots again after its wait's commit: taken, so no job (it is woken).
    expect(followOf(waited)).toEqual([]);
    await waitFor(async () => (held.state.entered === 1 ? true : null), { timeoutMs: 5_000, what: 'the holder running' });

    held.release();
    const done = await (waitedFor === 'a' ? second : first);
    expect(runsOf(done)).toMatchObject([{ kind: 'done' }]);
    // The slot freed: the waiter is woken at once, its job at the front of the queue.
    const wake = followOf(done);
    expect(wake).toEqual([{ job: expect.objectContaining({ rowId: waiter.rowId, handler: 'one-at-a-time', wait: 2 }), lifo: true }]);
    expect(runsOf(await e1.processJob(wake[0]!.job))).toMatchObject([{ kind: 'done' }]);
    expect(held.state.most).toBe(1);
    expect(await run(waiter.rowId, 'one-at-a-time')).toMatchObject({ state: 'done', attempts: 1 });
  });

  it('with a rate limit too (one transaction that holds the lock across round trips): the last slot, taken by two workers at once: exactly one leases it; the other joins the line without waiting for the lock (not an attempt), and is woken when the slot frees', async () => {
    const held = heldHandler({ name: 'one-at-a-time-rated', source: 'stripe', type: TYPE, concurrency: 1, rateLimit: { limit: 1000, period: '1s' } });
    const a = await newEvent();
    const b = await newEvent();
    // The gate that gets the slot's lock stops for 300 ms after counting, before its lease:
    // without the lock both would count 0 and both lease.
    const faults = createFaults('worker.gate-after-count:delay=300');
    const e1 = engine(db.pool, [held.handler], {}, { faults });
    const e2 = engine(db.pool, [held.handler], {}, { faults });
    const first = e1.processJob(dispatchJob(a.rowId, a.eventId));
    const second = e2.processJob(dispatchJob(b.rowId, b.eventId));
    // One of them returns at once: it did not queue on the lock the other holds for 300 ms.
    const settled = await Promise.race([first.then(() => 'a'), second.then(() => 'b'), new Promise((r) => setTimeout(() => r('none'), 5_000))]);
    expect(settled).not.toBe('none');
    expect(held.state.entered).toBe(0); // the lock holder is still in its 300 ms: the other did not wait for it
    const waiter = settled === 'a' ? a : b;
    const waited = await (settled === 'a' ? first : second);
    expect(runsOf(waited)).toEqual([{ kind: 'waiting', handler: 'one-at-a-time-rated', reason: 'concurrency' }]);
    // It joined without counting, so it looked again after its commit: the slot looked free (the
    // holder had not committed its lease), and the longest waiter (itself) was woken for it: no
    // longer waiting (a second wake-up would wake the next waiter, not this one again).
    expect(await run(waiter.rowId, 'one-at-a-time-rated')).toMatchObject({ state: 'received', waiting: null, attempts: 0 });
    const kick = followOf(waited);
    expect(kick).toEqual([{ job: expect.objectContaining({ rowId: waiter.rowId, handler: 'one-at-a-time-rated', wait: 2 }), lifo: true }]);
    await waitFor(async () => (held.state.entered === 1 ? true : null), { timeoutMs: 5_000, what: 'the holder running' });
    // That wake-up comes while the slot is taken: the run waits again, first in line, with no job.
    const again = await e2.processJob(kick[0]!.job);
    expect(runsOf(again)).toEqual([{ kind: 'waiting', handler: 'one-at-a-time-rated', reason: 'concurrency' }]);
    expect(followOf(again)).toEqual([]);
    expect(await run(waiter.rowId, 'one-at-a-time-rated')).toMatchObject({ state: 'received', waiting: 'concurrency', attempts: 0 });

    held.release();
    const done = await (settled === 'a' ? second : first);
    expect(runsOf(done)).toMatchObject([{ kind: 'done' }]);
    // The slot freed: the waiter is woken at once, its job at the front of the queue.
    const wake = followOf(done);
    expect(wake).toEqual([{ job: expect.objectContaining({ rowId: waiter.rowId, handler: 'one-at-a-time-rated', wait: 4 }), lifo: true }]);
    expect(runsOf(await e1.processJob(wake[0]!.job))).toMatchObject([{ kind: 'done' }]);
    expect(held.state.most).toBe(1);
    expect(await run(waiter.rowId, 'one-at-a-time-rated')).toMatchObject({ state: 'done', attempts: 1 });
    // The stale wake-up (wait 2) finds the run done: nothing to do, nothing scheduled.
    const stale = await e2.processJob(kick[0]!.job);
    expect(runsOf(stale)).toEqual([{ kind: 'skipped', handler: 'one-at-a-time-rated' }]);
    expect(followOf(stale)).toEqual([]);
  });

  it('a run waiting for a slot has no job: the run that frees the slot wakes it; a duplicate of its wake-up schedules nothing', async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    const h = defineHandler({ name: 'slot', source: 'stripe', type: TYPE, concurrency: 1 }, async () => hold);
    const a = await newEvent();
    const b = await newEvent();
    const e = engine(db.pool, [h]);
    const holding = e.processJob(dispatchJob(a.rowId, a.eventId));
    await waitFor(async () => ((await run(a.rowId, 'slot'))?.state === 'processing' ? true : null), { timeoutMs: 5_000, what: 'the holder leased' });
    const waited = await e.processJob(dispatchJob(b.rowId, b.eventId));
    expect(runsOf(waited)).toEqual([{ kind: 'waiting', handler: 'slot', reason: 'concurrency' }]);
    expect(followOf(waited)).toEqual([]); // no poll: it is woken
    expect(await run(b.rowId, 'slot')).toMatchObject({ state: 'received', waiting: 'concurrency', waits: 1 });
    release();
    const wake = followOf(await holding);
    expect(wake).toEqual([{ job: expect.objectContaining({ rowId: b.rowId, handler: 'slot', wait: 2 }), lifo: true }]);
    const [outcome] = runsOf(await e.processJob(wake[0]!.job));
    expect(outcome).toMatchObject({ kind: 'done' });
    // A second copy of the wake-up (recovery, a redelivered job): nothing to run, nothing scheduled.
    const duplicate = await e.processJob(wake[0]!.job);
    expect(runsOf(duplicate)).toEqual([{ kind: 'skipped', handler: 'slot' }]);
    expect(followOf(duplicate)).toEqual([]);
  });

  // Mutant killed: flow-woken-twice (a woken run still a waiter: the second slot's run woke it again, and that slot's chain of hand-overs ended).
  it('two slots freed one after the other wake two different waiters: a woken run is no longer waiting, so the second wake-up takes the next in line', async () => {
    const holds = new Map<string, () => void>();
    const h = defineHandler({ name: 'two-chains', source: 'stripe', type: TYPE, concurrency: 2 }, async (event) => {
      await new Promise<void>((resolve) => holds.set(event.eventId, resolve));
    });
    const e = engine(db.pool, [h]);
    const [a, b] = [await newEvent(), await newEvent()];
    const holding = [a, b].map((x) => e.processJob(dispatchJob(x.rowId, x.eventId)));
    await waitFor(() => (holds.size === 2 ? true : null), { timeoutMs: 5_000, what: 'both slots taken' });
    const waiters = [await newEvent(), await newEvent(), await newEvent()];
    for (const w of waiters) expect(runsOf(await e.processJob(dispatchJob(w.rowId, w.eventId)))).toEqual([{ kind: 'waiting', handler: 'two-chains', reason: 'concurrency' }]);
    // a's slot frees: the longest waiter is woken; its job is not run yet (the woken run has not
    // reached its gate) when b's slot frees.
    holds.get(a.eventId)!();
    const first = followOf(await holding[0]!);
    expect(first.map((f) => f.job.rowId)).toEqual([waiters[0]!.rowId]);
    expect(await run(waiters[0]!.rowId, 'two-chains')).toMatchObject({ state: 'received', waiting: null, waits: 2 });
    holds.get(b.eventId)!();
    const second = followOf(await holding[1]!);
    expect(second.map((f) => f.job.rowId)).toEqual([waiters[1]!.rowId]);
    // Both woken runs take the two slots; the third waits on.
    const woken = Promise.all([...first, ...second].map((f) => e.processJob(f.job)));
    await waitFor(() => (holds.size === 4 ? true : null), { timeoutMs: 5_000, what: 'both woken runs in their slots' });
    expect(await runStates('two-chains')).toEqual({ done: 2, processing: 2, received: 1 });
    for (const w of waiters.slice(0, 2)) holds.get(w.eventId)!();
    expect((await woken).flatMap(runsOf).map((r) => r.kind)).toEqual(['done', 'done']);
  });

  // Mutant killed: flow-hand-over-not-leased (the wake-up only wakes: the woken run's gate is a statement of its own).
  it('a job that runs its woken waiter itself has it leased in the wake-up: the follow-up carries the lease, the run is processing before it starts, and its own end hands the next one over', async () => {
    const holds = new Map<string, () => void>();
    const h = defineHandler({ name: 'lease-handed', source: 'stripe', type: TYPE, concurrency: 1 }, async (event) => {
      await new Promise<void>((resolve) => holds.set(event.eventId, resolve));
    });
    const e = engine(db.pool, [h]);
    const a = await newEvent();
    const holding = e.processJob(dispatchJob(a.rowId, a.eventId), { leaseWakeUp: true });
    await waitFor(() => (holds.has(a.eventId) ? true : null), { timeoutMs: 5_000, what: 'a holds the slot' });
    const [b, c] = [await newEvent(), await newEvent()];
    for (const w of [b, c]) expect(runsOf(await e.processJob(dispatchJob(w.rowId, w.eventId)))).toEqual([{ kind: 'waiting', handler: 'lease-handed', reason: 'concurrency' }]);
    holds.get(a.eventId)!();
    const [wake] = followOf(await holding);
    // b leased by the wake-up itself: no job to enqueue, no gate of its own to pass.
    expect(wake).toMatchObject({ job: { rowId: b.rowId, handler: 'lease-handed', attempt: 0, wait: 2 }, lifo: true, handedOver: { flowKey: null } });
    expect(await run(b.rowId, 'lease-handed')).toMatchObject({ state: 'processing', waiting: null, attempts: 1, waits: 2 });
    expect(await run(c.rowId, 'lease-handed')).toMatchObject({ state: 'received', waiting: 'concurrency', attempts: 0 });
    // A job of b (a stale wake-up, a redelivery) finds it leased: nothing to run, nothing scheduled.
    expect(runsOf(await e.processJob({ ...wake!.job, wait: 1 }))).toEqual([{ kind: 'skipped', handler: 'lease-handed' }]);
    const running = e.runHandedOver(wake!.handedOver!, { leaseWakeUp: true });
    await waitFor(() => (holds.has(b.eventId) ? true : null), { timeoutMs: 5_000, what: 'b running' });
    holds.get(b.eventId)!();
    const ran = await running;
    expect(runsOf(ran)).toMatchObject([{ kind: 'done', handler: 'lease-handed' }]);
    // b's end hands its slot to c, leased too; without `leaseWakeUp` a wake-up is a job, as before.
    expect(followOf(ran)).toMatchObject([{ job: { rowId: c.rowId }, handedOver: {} }]);
    expect(await run(c.rowId, 'lease-handed')).toMatchObject({ state: 'processing', attempts: 1 });
    const last = e.runHandedOver(followOf(ran)[0]!.handedOver!);
    await waitFor(() => (holds.has(c.eventId) ? true : null), { timeoutMs: 5_000, what: 'c running' });
    holds.get(c.eventId)!();
    expect(runsOf(await last)).toMatchObject([{ kind: 'done' }]);
    expect(followOf(await last)).toEqual([]);
    expect(await runStates('lease-handed')).toEqual({ done: 3 });
  });

  // Mutant killed: flow-hand-over-over-limit (the wake-up leased a waiter beside the run that took the slot first).
  it('a new run that takes a freed slot before its hand-over: the hand-over leases nobody (the slot is not free) and the waiter waits on, with no job, until that run hands the slot over', async () => {
    let lateHandOver!: () => void;
    const handOverHeld = new Promise<void>((resolve) => (lateHandOver = resolve));
    let atHandOver!: () => void;
    const reached = new Promise<void>((resolve) => (atHandOver = resolve));
    // The first engine stops between its run's end and its hand-over, once.
    let stopped = false;
    const faults = {
      async hit(point: string) {
        if (point !== 'worker.before-hand-over' || stopped) return;
        stopped = true;
        atHandOver();
        await handOverHeld;
      },
    };
    const held = heldHandler({ name: 'slot-taken-first', source: 'stripe', type: TYPE, concurrency: 1 });
    const e1 = engine(db.pool, [held.handler], {}, { faults });
    const e2 = engine(db.pool, [held.handler]);
    const [a, b, c] = [await newEvent(), await newEvent(), await newEvent()];
    const holding = e1.processJob(dispatchJob(a.rowId, a.eventId), { leaseWakeUp: true });
    await waitFor(() => (held.state.entered === 1 ? true : null), { timeoutMs: 5_000, what: 'a holds the slot' });
    expect(runsOf(await e2.processJob(dispatchJob(b.rowId, b.eventId)))).toEqual([{ kind: 'waiting', handler: 'slot-taken-first', reason: 'concurrency' }]);
    held.release();
    await reached; // a is done; its slot not yet handed over
    // c, new, takes the free slot through its gate (it holds: the release above let a go, not c).
    const second = heldHandler({ name: 'slot-taken-first', source: 'stripe', type: TYPE, concurrency: 1 });
    const e3 = engine(db.pool, [second.handler]);
    const taking = e3.processJob(dispatchJob(c.rowId, c.eventId), { leaseWakeUp: true });
    await waitFor(() => (second.state.entered === 1 ? true : null), { timeoutMs: 5_000, what: 'c took the slot' });
    lateHandOver();
    const ended = await holding;
    expect(runsOf(ended)).toMatchObject([{ kind: 'done' }]);
    expect(followOf(ended)).toEqual([]);
    expect(await run(b.rowId, 'slot-taken-first')).toMatchObject({ state: 'received', waiting: 'concurrency', attempts: 0 });
    // c's end hands the slot to b.
    second.release();
    const [wake] = followOf(await taking);
    expect(wake).toMatchObject({ job: { rowId: b.rowId }, handedOver: {} });
    const woken = await e3.runHandedOver(wake!.handedOver!);
    expect(runsOf(woken)).toMatchObject([{ kind: 'done' }]);
    expect(held.state.most + second.state.most).toBe(2); // one run in the slot at a time: a, then c, then b (b ran in e3's handler)
    expect(await runStates('slot-taken-first')).toEqual({ done: 3 });
  });

  it('a waiter whose handler is paused is not leased by the hand-over: it is woken with a job, as before, and that job marks it paused', async () => {
    const held = heldHandler({ name: 'handed-paused', source: 'stripe', type: TYPE, concurrency: 1 });
    const e = engine(db.pool, [held.handler]);
    const [a, b] = [await newEvent(), await newEvent()];
    const holding = e.processJob(dispatchJob(a.rowId, a.eventId), { leaseWakeUp: true });
    await waitFor(() => (held.state.entered === 1 ? true : null), { timeoutMs: 5_000, what: 'a holds the slot' });
    expect(runsOf(await e.processJob(dispatchJob(b.rowId, b.eventId)))).toEqual([{ kind: 'waiting', handler: 'handed-paused', reason: 'concurrency' }]);
    await q.pause(db.pool, 'handler', 'handed-paused', 'test', 'paused while a runs');
    held.release();
    const wake = followOf(await holding);
    expect(wake).toEqual([{ job: expect.objectContaining({ rowId: b.rowId, handler: 'handed-paused' }), lifo: true }]);
    expect(runsOf(await e.processJob(wake[0]!.job))).toEqual([{ kind: 'waiting', handler: 'handed-paused', reason: 'paused' }]);
    expect(await run(b.rowId, 'handed-paused')).toMatchObject({ state: 'received', waiting: 'paused', attempts: 0 });
  });

  it("the worker that frees a slot runs its woken waiter in the same job, not through the queue; the woken run's retry is its own event's job", async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    const a = await newEvent();
    const b = await newEvent();
    const h = defineHandler({ name: 'handed', source: 'stripe', type: TYPE, concurrency: 1 }, async (event) => {
      if (event.eventId === a.eventId) await hold;
      if (event.eventId === b.eventId && event.attempt === 1) throw new Error('not yet (first attempt of the woken run)');
    });
    const prefix = testPrefix();
    const worker = buildWorker(loadWorkerConfig(testEnv({ databaseUrl: db.url, prefix, extra: { WORKER_CONCURRENCY: '4', RETRY_BACKOFF_MS: '100' } })), [h], { log: testLog });
    const ended: string[] = [];
    worker.events.on('run:ended', (r) => void ended.push(`${r.handler} ${r.outcome}`));
    try {
      await worker.start({ reconciler: false, metricsServer: false, backfill: false });
      await enqueueEvent(worker.queues, dispatchJob(a.rowId, a.eventId));
      await waitFor(async () => ((await run(a.rowId, 'handed'))?.state === 'processing' ? true : null), { timeoutMs: 5_000, what: 'a holds the slot' });
      await enqueueEvent(worker.queues, dispatchJob(b.rowId, b.eventId));
      await waitFor(async () => ((await run(b.rowId, 'handed'))?.waiting === 'concurrency' ? true : null), { timeoutMs: 5_000, what: 'b waits for the slot' });
      release();
      await waitFor(async () => ((await run(b.rowId, 'handed'))?.state === 'done' ? true : null), { timeoutMs: 10_000, what: 'b done, after its retry' });
      // The run's commit comes before its report and its job's completion: wait for both.
      await waitFor(() => (ended.length === 3 ? true : null), { timeoutMs: 5_000, what: 'three attempts reported' });
      expect(ended).toEqual(['handed done', 'handed retry', 'handed done']);
      // The jobs the queue ran: a's dispatch and b's; b's woken attempt had no job of its own (it
      // ran in a's job, which completed after it); its retry did, under b's own event.
      const completed = async () => (await worker.queues.shards[0]!.getJobs(['completed'])).map((job) => job.data);
      await waitFor(async () => ((await completed()).some((job) => job.rowId === b.rowId && job.handler === 'handed') ? true : null), {
        timeoutMs: 5_000,
        what: "b's retry job completed",
      });
      const jobs = await completed();
      const ofB = jobs.filter((job) => job.rowId === b.rowId);
      expect(ofB.map((job) => job.handler ?? 'dispatch').sort()).toEqual(['dispatch', 'handed']);
      expect(ofB.find((job) => job.handler === 'handed')).toMatchObject({ eventId: b.eventId, attempt: 1 });
      expect(jobs.filter((job) => job.rowId === a.rowId).map((job) => job.handler ?? 'dispatch')).toEqual(['dispatch']);
    } finally {
      release();
      await worker.close();
    }
  });

  it("the reconciler leaves a full group's waiters alone (no job, no write) and wakes those of a group whose wake-up was lost", async () => {
    const prefix = testPrefix();
    const store = testQueueStore(db.url, prefix);
    const queue = testQueues(store, prefix);
    const reconciler = createReconciler({ pool: db.pool, queries: q, queue, log: testLog, settings: { intervalMs: 1_000, requeueAfterMs: 1_000, batchSize: 100 } });
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    const h = defineHandler({ name: 'two-slots', source: 'stripe', type: TYPE, concurrency: 2 }, async () => hold);
    const e = engine(db.pool, [h]);
    try {
      const running: Promise<JobOutcome>[] = [];
      for (const holder of [await newEvent(), await newEvent()]) {
        running.push(e.processJob(dispatchJob(holder.rowId, holder.eventId)));
        const taken = running.length;
        await waitFor(async () => ((await runStates('two-slots')).processing === taken ? true : null), { timeoutMs: 5_000, what: `${taken} slot(s) taken` });
      }
      const waiters = [await newEvent(), await newEvent(), await newEvent(), await newEvent(), await newEvent()];
      for (const w of waiters) expect(runsOf(await e.processJob(dispatchJob(w.rowId, w.eventId)))).toEqual([{ kind: 'waiting', handler: 'two-slots', reason: 'concurrency' }]);
      // Long untouched, but both slots are taken: they wait on purpose.
      await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() - interval '1 hour' WHERE state = 'received'`);
      const touched = async () => (await db.pool.query<{ t: string }>(`SELECT max(updated_at)::text AS t FROM ${T.runs} WHERE state = 'received'`)).rows[0]!.t;
      const before = await touched();
      expect(await reconciler.runOnce()).toMatchObject({ leader: true, requeued: 0 });
      expect(await touched()).toBe(before);
      // Both holders end and wake the two longest waiters, and those wake-ups are lost (the jobs
      // they return are dropped here, as Redis restarted empty would). The woken runs are no
      // longer waiting: the reconciler re-enqueues them as runs whose job was lost. The group's
      // slots look free (a woken run holds none until its gate), so it wakes as many of the
      // waiters as there are free slots too, the longest first, and leaves the last alone: two
      // runs more than the slots, which their gates hold back (the limit is the gate's).
      release();
      await Promise.all(running);
      expect((await run(waiters[0]!.rowId, 'two-slots')).waiting).toBeNull();
      await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() - interval '1 hour' WHERE state = 'received'`);
      expect(await reconciler.runOnce()).toMatchObject({ requeued: 4 });
      const jobs = (await Promise.all(queue.shards.map((shard) => shard.getJobs(['waiting', 'prioritized'])))).flat();
      expect(jobs.map((j) => j.data.rowId).sort()).toEqual(
        waiters
          .slice(0, 4)
          .map((w) => w.rowId)
          .sort(),
      );
      expect(await run(waiters[4]!.rowId, 'two-slots')).toMatchObject({ state: 'received', waiting: 'concurrency' });
      for (const job of jobs) expect(runsOf(await e.processJob(job.data))).toMatchObject([{ kind: 'done' }]);
    } finally {
      release();
      await queue.close();
      await closeQueueConnection(store);
    }
  });

  it('a limit holds at the downstream when renewals stall: the call is abandoned before the lease can run out, and the next run starts only after', async () => {
    const sandbox = await startSandbox();
    try {
      // Long enough that the lease clock's margin (a tenth, at least 200 ms) is not eaten by a
      // busy machine's late timers: what is tested is the order, not the margin's size.
      const LEASE = 3_000;
      const a = await newEvent();
      let abortedAt = 0;
      const b = await newEvent();
      const h = defineHandler({ name: 'fragile', source: 'stripe', type: TYPE, concurrency: 1 }, async (event, ctx) => {
        await ctx.step('work', async ({ idempotencyKey, signal }) => {
          signal.addEventListener('abort', () => {
            abortedAt = Date.now();
          });
          // The work API holds the first call 10 s: far past the 3 s lease.
          const response = await fetch(`${sandbox.url}/work/tasks`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
            body: JSON.stringify({ task: 'fragile', key: event.eventId, ms: event.eventId === a.eventId ? 10_000 : 50 }),
            signal,
          });
          if (!response.ok) throw new Error(`work API answered ${response.status}`);
          return null;
        });
      });
      // Worker 1's renewals stall (a stalled connection); worker 2 is healthy.
      const stalled = engine(db.pool, [h], { leaseMs: LEASE }, { faults: createFaults('worker.before-renew:delay=60000') });
      const healthy = engine(db.pool, [h], { leaseMs: LEASE });
      const holding = stalled.processJob(dispatchJob(a.rowId, a.eventId));
      await waitFor(async () => (sandbox.work('fragile').calls === 1 ? true : null), { timeoutMs: 10_000, what: "worker 1's call in flight" });
      expect(runsOf(await healthy.processJob(dispatchJob(b.rowId, b.eventId)))).toEqual([{ kind: 'waiting', handler: 'fragile', reason: 'concurrency' }]);

      // Worker 1 cannot renew: it abandons its call before its lease can run out.
      expect(runsOf(await holding)).toEqual([{ kind: 'lease-lost', handler: 'fragile', type: TYPE }]);
      const abandonedAt = Date.now();
      // The work API hears of it when the connection closes (its own event, a moment later).
      await waitFor(async () => (sandbox.work('fragile').abandoned === 1 ? true : null), { timeoutMs: 5_000, what: 'the work API seeing the call abandoned' });
      expect(sandbox.work('fragile')).toMatchObject({ abandoned: 1, applied: 0 });
      // Abandoned while the lease still ran: when the signal fired, against the lease's end (one
      // machine, one clock; measured at the abort, not after the test's own waits above).
      const { rows: lease } = await db.pool.query<{ left: number }>(
        `SELECT extract(epoch FROM lease_until)::float8 * 1000 - $2::float8 AS left FROM ${T.runs} WHERE event_row_id = $1`,
        [a.rowId, abortedAt],
      );
      expect(abortedAt).toBeGreaterThan(0);
      expect(lease[0]!.left).toBeGreaterThan(0);
      console.log(`[figure] lease clock: the stalled worker abandoned its call ${lease[0]!.left.toFixed(0)} ms before its ${LEASE} ms lease ran out`);

      // Worker 2 takes the slot only once that lease is gone: its run waits until then.
      const job = { rowId: b.rowId, source: 'stripe', eventId: b.eventId, handler: 'fragile', attempt: 0 };
      const second = await waitFor(
        async () => {
          const [outcome] = runsOf(await healthy.processJob(job));
          return outcome!.kind === 'waiting' ? null : outcome;
        },
        { timeoutMs: 10_000, intervalMs: 50, what: "worker 2's run leasing the slot" },
      );
      expect(second).toMatchObject({ kind: 'done' });
      const work = sandbox.work('fragile');
      expect(work.maxInFlight).toBe(1); // never two calls at once at the downstream
      expect(work.calls).toBe(2);
      expect(work.starts[1]!).toBeGreaterThanOrEqual(abandonedAt);
    } finally {
      await sandbox.close();
    }
  });

  it('per key: a second run of the same key waits, another key runs', async () => {
    const hold: (() => void)[] = [];
    const h = defineHandler(
      { name: 'per-customer', source: 'stripe', type: TYPE, concurrency: { key: (event) => String(event.payload.data.object.customer), limit: 1 } },
      async () => new Promise<void>((resolve) => hold.push(resolve)),
    );
    const e = engine(db.pool, [h]);
    const a1 = await newEvent('cus_a');
    const a2 = await newEvent('cus_a');
    const b1 = await newEvent('cus_b');
    const running = e.processJob(dispatchJob(a1.rowId, a1.eventId));
    await new Promise((r) => setTimeout(r, 200));
    expect(runsOf(await e.processJob(dispatchJob(a2.rowId, a2.eventId)))).toEqual([{ kind: 'waiting', handler: 'per-customer', reason: 'concurrency' }]);
    const other = e.processJob(dispatchJob(b1.rowId, b1.eventId));
    await new Promise((r) => setTimeout(r, 200));
    expect(hold).toHaveLength(2); // cus_a's first and cus_b's, side by side
    expect((await db.pool.query(`SELECT flow_key FROM ${T.runs} WHERE event_row_id = $1`, [a2.rowId])).rows[0]).toEqual({ flow_key: 'cus_a' });
    for (const r of hold) r();
    await Promise.all([running, other]);
  });

  it('an expired lease frees its slot (a crashed worker holds none past LEASE_MS)', async () => {
    const h = defineHandler({ name: 'leased', source: 'stripe', type: TYPE, concurrency: 1 }, async () => {});
    const a = await newEvent();
    const b = await newEvent();
    // A run in progress under a live lease, as a worker would hold it.
    await db.pool.query(
      `WITH ev AS (UPDATE ${T.events} SET state = 'processing', runs_pending = 1 WHERE id = $1 RETURNING id)
       INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, lease_token, lease_until) SELECT id, 'leased', 'processing', 1, gen_random_uuid(), now() + interval '1 minute' FROM ev`,
      [a.rowId],
    );
    const e = engine(db.pool, [h]);
    expect(runsOf(await e.processJob(dispatchJob(b.rowId, b.eventId)))).toEqual([{ kind: 'waiting', handler: 'leased', reason: 'concurrency' }]);
    // The worker dies: its lease runs out. The slot is free without anyone releasing it.
    await db.pool.query(`UPDATE ${T.runs} SET lease_until = now() - interval '1 second' WHERE event_row_id = $1`, [a.rowId]);
    expect(runsOf(await e.processJob({ rowId: b.rowId, source: 'stripe', eventId: b.eventId, handler: 'leased', attempt: 0, wait: 1 }))).toMatchObject([{ kind: 'done' }]);
  });

  it('a key function that throws or returns no string fails the run, saying so (it is not run without its limit)', async () => {
    const bad = defineHandler({ name: 'bad-key', source: 'stripe', type: TYPE, concurrency: { key: () => undefined as unknown as string, limit: 1 } }, async () => {
      throw new Error('must not run');
    });
    const a = await newEvent();
    const [outcome] = runsOf(await engine(db.pool, [bad]).processJob(dispatchJob(a.rowId, a.eventId)));
    expect(outcome).toMatchObject({
      kind: 'failed',
      error: expect.stringContaining('concurrency.key must return a non-empty string of at most 200 characters; it returned undefined'),
    });
    expect(await run(a.rowId, 'bad-key')).toMatchObject({ state: 'failed' });
  });
});

describe('rate limit', () => {
  it('starts beyond the limit in one window wait for the next (not attempts); a lease not taken gives its start back', async () => {
    const h = defineHandler({ name: 'rated', source: 'stripe', type: TYPE, rateLimit: { limit: 2, period: '1h' } }, async () => {});
    const e = engine(db.pool, [h]);
    const events = [await newEvent(), await newEvent(), await newEvent()];
    const outcomes = [];
    for (const ev of events) outcomes.push(runsOf(await e.processJob(dispatchJob(ev.rowId, ev.eventId)))[0]);
    expect(outcomes.map((o) => o!.kind)).toEqual(['done', 'done', 'waiting']);
    expect(await run(events[2]!.rowId, 'rated')).toMatchObject({ state: 'received', waiting: 'rate-limit', attempts: 0 });
    expect((await db.pool.query(`SELECT started FROM oncehook.rate_windows WHERE handler = 'rated'`)).rows).toEqual([{ started: 2 }]);
    // A job for a finished run (a duplicate) takes no start: its lease fails and rolls the start back.
    await db.pool.query(`UPDATE oncehook.rate_windows SET started = 1`);
    expect(runsOf(await e.processJob({ rowId: events[0]!.rowId, source: 'stripe', eventId: events[0]!.eventId, handler: 'rated', attempt: 1 }))).toEqual([
      { kind: 'skipped', handler: 'rated' },
    ]);
    expect((await db.pool.query(`SELECT started FROM oncehook.rate_windows WHERE handler = 'rated'`)).rows).toEqual([{ started: 1 }]);
  });

  it('a stale job of a run waiting for the rate schedules nothing: one chain of jobs per waiting run', async () => {
    const h = defineHandler({ name: 'rated-chain', source: 'stripe', type: TYPE, rateLimit: { limit: 1, period: '1h' } }, async () => {});
    const e = engine(db.pool, [h]);
    const first = await newEvent();
    const second = await newEvent();
    expect(runsOf(await e.processJob(dispatchJob(first.rowId, first.eventId)))).toMatchObject([{ kind: 'done' }]);
    const waited = await e.processJob(dispatchJob(second.rowId, second.eventId));
    expect(runsOf(waited)).toEqual([{ kind: 'waiting', handler: 'rated-chain', reason: 'rate-limit' }]);
    // Its one next look, in the window its turn is expected in.
    const [look] = followOf(waited);
    expect(followOf(waited)).toHaveLength(1);
    // That look finds the window still full: it waits again and schedules the chain's next job.
    const again = await e.processJob(look!.job);
    expect(runsOf(again)).toEqual([{ kind: 'waiting', handler: 'rated-chain', reason: 'rate-limit' }]);
    expect(followOf(again)).toHaveLength(1);
    const fence = (await run(second.rowId, 'rated-chain'))!.waits;
    // A second copy of the same look (recovery, a redelivered job) is stale: it changes nothing
    // and schedules nothing, or every duplicate would start a chain of its own.
    const stale = await e.processJob(look!.job);
    expect(followOf(stale)).toEqual([]);
    expect((await run(second.rowId, 'rated-chain'))!.waits).toBe(fence);
  });
});

describe('pause', () => {
  const plain = (name = 'mailer') => defineHandler({ name, source: 'stripe', type: TYPE }, async () => {});

  it('a paused handler: the dispatch creates its run waiting (no lease, no attempt); its other handlers run; resume enqueues it', async () => {
    const prefix = testPrefix();
    const store = testQueueStore(db.url, prefix);
    const queue = testQueues(store, prefix);
    const ops = createOperations({ pool: db.pool, queries: q, queue });
    try {
      expect(await ops.pause({ scope: 'handler', name: 'mailer' }, 'alice', 'provider down')).toMatchObject({ ok: true, alreadyPaused: false });
      expect(await ops.pause({ scope: 'handler', name: 'mailer' }, 'bob', 'again')).toMatchObject({ ok: true, alreadyPaused: true, pause: { actor: 'alice' } });
      const a = await newEvent();
      const e = engine(db.pool, [plain('mailer'), plain('ledger')]);
      const outcome = runsOf(await e.processJob(dispatchJob(a.rowId, a.eventId)));
      expect(outcome).toEqual([
        { kind: 'done', handler: 'ledger', type: TYPE },
        { kind: 'waiting', handler: 'mailer', reason: 'paused' },
      ]);
      expect(await run(a.rowId, 'mailer')).toMatchObject({ state: 'received', waiting: 'paused', attempts: 0 });
      // A job for it (a retry, a recovery) does not start it either.
      expect(runsOf(await e.processJob({ ...dispatchJob(a.rowId, a.eventId), handler: 'mailer' }))).toEqual([{ kind: 'waiting', handler: 'mailer', reason: 'paused' }]);
      // The reconciler's lost-job scan leaves it alone.
      await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() - interval '1 hour'`);
      expect(await q.takeStaleReceivedRuns(db.pool, 1_000, 100)).toEqual([]);

      const resumed = await ops.resume({ scope: 'handler', name: 'mailer' }, 'alice', 'back');
      expect(resumed).toMatchObject({ ok: true, released: 1, enqueueFailed: 0 });
      expect(await run(a.rowId, 'mailer')).toMatchObject({ state: 'received', waiting: null, waits: 1 });
      const job = (await Promise.all(queue.shards.map((shard) => shard.getJobs(['waiting', 'prioritized'])))).flat()[0]!;
      expect(job.data).toMatchObject({ rowId: a.rowId, handler: 'mailer', wait: 1 });
      expect(runsOf(await e.processJob(job.data))).toMatchObject([{ kind: 'done', handler: 'mailer' }]);
      expect(await ops.resume({ scope: 'handler', name: 'mailer' }, 'alice', 'back')).toMatchObject({ ok: false, reason: expect.stringContaining('is not paused') });
    } finally {
      await queue.close();
      await closeQueueConnection(store);
    }
  });

  for (const [boundary, now] of [
    ['an external step', true],
    ['a local step', true],
    ['an external step', false],
  ] as const) {
    it(`pause${now ? ' --now' : ''} while a run is in progress, before ${boundary}: ${now ? 'it stops there (the committed step stays), waits with its attempt given back; resume finishes it, each step once' : 'the run finishes (a plain pause stops only new runs)'}`, async () => {
      let release!: () => void;
      const between = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => (entered = resolve));
      const calls: string[] = [];
      const h = defineHandler({ name: 'two-steps', source: 'stripe', type: TYPE }, async (_event, ctx) => {
        await ctx.transaction('first', async () => {
          calls.push('first');
          return null;
        });
        entered();
        await between;
        const second = async () => {
          calls.push('second');
          return null;
        };
        if (boundary === 'a local step') await ctx.transaction('second', second);
        else await ctx.step('second', second);
      });
      const e = engine(db.pool, [h]);
      const a = await newEvent();
      const running = e.processJob(dispatchJob(a.rowId, a.eventId));
      await inside;
      await q.pause(db.pool, 'handler', 'two-steps', 'ops', 'stop it', now);
      release();
      if (!now) {
        expect(runsOf(await running)).toMatchObject([{ kind: 'done' }]);
        expect(calls).toEqual(['first', 'second']);
        return;
      }
      expect(runsOf(await running)).toEqual([{ kind: 'waiting', handler: 'two-steps', reason: 'paused' }]);
      expect(calls).toEqual(['first']);
      expect(await run(a.rowId, 'two-steps')).toMatchObject({ state: 'received', waiting: 'paused', attempts: 0 });
      await q.resume(db.pool, 'handler', 'two-steps', 'ops', 'go');
      const [job] = await q.releasePaused(db.pool, 10);
      expect(runsOf(await e.processJob(job!))).toMatchObject([{ kind: 'done' }]);
      expect(calls).toEqual(['first', 'second']); // the committed step was not run again
      expect(await run(a.rowId, 'two-steps')).toMatchObject({ state: 'done', attempts: 1 });
    });
  }

  // Mutant killed: stop-now-ignored-external-record (the run goes on to its next step).
  it('pause --now during an external call: the call is recorded (resumed, the run does not make it again) and the run stops after it; resume runs the next step', async () => {
    let release!: () => void;
    const during = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const calls: string[] = [];
    const h = defineHandler({ name: 'two-calls', source: 'stripe', type: TYPE }, async (_event, ctx) => {
      await ctx.step('first', async () => {
        calls.push('first');
        entered();
        await during;
        return { sent: 1 };
      });
      calls.push('between'); // code outside steps: the stop lands before it, not at the next step
      await ctx.step('second', async () => {
        calls.push('second');
        return { sent: 2 };
      });
    });
    const e = engine(db.pool, [h]);
    const a = await newEvent();
    const running = e.processJob(dispatchJob(a.rowId, a.eventId));
    await inside;
    await q.pause(db.pool, 'handler', 'two-calls', 'ops', 'stop it', true);
    release();
    expect(runsOf(await running)).toEqual([{ kind: 'waiting', handler: 'two-calls', reason: 'paused' }]);
    expect(calls).toEqual(['first']);
    const stopped = await run(a.rowId, 'two-calls');
    expect(stopped).toMatchObject({ state: 'received', waiting: 'paused', attempts: 0 });
    const { rows } = await db.pool.query<{ name: string }>(
      `SELECT s.name FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id WHERE r.event_row_id = $1 AND r.handler = 'two-calls'`,
      [a.rowId],
    );
    expect(rows.map((r) => r.name)).toEqual(['first']);
    await q.resume(db.pool, 'handler', 'two-calls', 'ops', 'go');
    const [job] = await q.releasePaused(db.pool, 10);
    expect(runsOf(await e.processJob(job!))).toMatchObject([{ kind: 'done' }]);
    expect(calls).toEqual(['first', 'between', 'second']); // the recorded call was not made again
  });

  it('pause --now of a handler already paused makes the pause stop runs in progress too', async () => {
    expect(await q.pause(db.pool, 'handler', 'h', 'alice', 'first', false)).toMatchObject({ created: true, stopNow: false });
    expect(await q.pause(db.pool, 'handler', 'h', 'bob', 'second', false)).toBeNull();
    expect(await q.pause(db.pool, 'handler', 'h', 'bob', 'now', true)).toMatchObject({ created: false, stopNow: true, reason: 'first', actor: 'alice' });
    expect((await db.pool.query(`SELECT actor, reason, detail FROM ${T.actions} ORDER BY id`)).rows).toEqual([
      { actor: 'alice', reason: 'first', detail: { now: false } },
      { actor: 'bob', reason: 'now', detail: { now: true } },
    ]);
  });

  it('a paused source: every handler of its events waits; other sources run', async () => {
    await q.pause(db.pool, 'source', 'stripe', 'ops', 'maintenance');
    const a = await newEvent();
    expect(runsOf(await engine(db.pool, [plain('x'), plain('y')]).processJob(dispatchJob(a.rowId, a.eventId))).map((r) => r.kind)).toEqual(['waiting', 'waiting']);
    // Resuming the handler alone does not release what the source's pause holds.
    await q.resume(db.pool, 'source', 'stripe', 'ops', 'done');
    expect((await q.releasePaused(db.pool, 100)).map((j) => j.handler).sort()).toEqual(['x', 'y']);
  });

  it('a pause removed without releasing its runs (by hand, in SQL): the reconciler releases them', async () => {
    await q.pause(db.pool, 'handler', 'mailer', 'ops', 'x');
    const a = await newEvent();
    await engine(db.pool, [plain()]).processJob(dispatchJob(a.rowId, a.eventId));
    await q.resume(db.pool, 'handler', 'mailer', 'ops', 'y'); // the pause row only, as a DELETE by hand would
    expect((await run(a.rowId, 'mailer')).waiting).toBe('paused');
    expect(await q.releasePaused(db.pool, 10)).toEqual([expect.objectContaining({ rowId: a.rowId, handler: 'mailer', wait: 1 })]);
  });
});

describe('gauges', () => {
  it('oncehook_paused and oncehook_runs_waiting follow the pauses; a resumed pause leaves no series behind', async () => {
    const prefix = testPrefix();
    const store = testQueueStore(db.url, prefix);
    const queue = testQueues(store, prefix);
    const metrics = createWorkerMetrics({ defaultMetrics: false });
    const reconciler = createReconciler({ pool: db.pool, queries: q, queue, log: testLog, settings: { intervalMs: 1_000, requeueAfterMs: 60_000, batchSize: 100 }, metrics });
    try {
      await q.pause(db.pool, 'handler', 'mailer', 'circuit-breaker', 'x');
      const a = await newEvent();
      await engine(db.pool, [defineHandler({ name: 'mailer', source: 'stripe', type: TYPE }, async () => {})]).processJob(dispatchJob(a.rowId, a.eventId));
      await reconciler.runOnce();
      const text = await metrics.registry.metrics();
      expect(text).toContain('oncehook_paused{scope="handler",name="mailer",by="circuit-breaker"} 1');
      expect(text).toContain('oncehook_runs_waiting{handler="mailer",reason="paused"} 1');
      expect(text).toMatch(/oncehook_paused_seconds\{scope="handler",name="mailer"\} \d/);
      // A paused run waits on purpose: not stuck (no OncehookEventsStuck page for every pause), not in the admin's Stuck list.
      await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() - interval '1 hour'`);
      expect((await q.pendingCounts(db.pool, 1_000)).runsReceivedStale).toBe(0);
      expect(await q.listStuckRuns(db.pool, 1_000, 10)).toEqual([]);
      await q.resume(db.pool, 'handler', 'mailer', 'ops', 'y');
      await reconciler.runOnce();
      const after = await metrics.registry.metrics();
      expect(after).not.toContain('name="mailer"');
      expect(after).not.toContain('oncehook_runs_waiting{');
    } finally {
      await queue.close();
      await closeQueueConnection(store);
    }
  });
});

describe('circuit breaker', () => {
  it('after N failed attempts in a row the handler pauses itself with the reason; a success in between restarts the count; resume restarts it too', async () => {
    let fail = true;
    const h = defineHandler({ name: 'flaky', source: 'stripe', type: TYPE, circuitBreaker: { consecutiveFailures: 3 }, retries: { maxAttempts: 100 } }, async () => {
      if (fail) throw new Error('email API 503');
    });
    const e = engine(db.pool, [h]);
    const a = await newEvent();
    const job = { ...dispatchJob(a.rowId, a.eventId), handler: 'flaky' };
    expect(runsOf(await e.processJob(dispatchJob(a.rowId, a.eventId)))[0]!.kind).toBe('retry');
    expect(runsOf(await e.processJob(job))[0]!.kind).toBe('retry');
    fail = false;
    const b = await newEvent();
    expect(runsOf(await e.processJob(dispatchJob(b.rowId, b.eventId)))[0]!.kind).toBe('done'); // the count restarts
    fail = true;
    for (const _ of [1, 2]) expect(runsOf(await e.processJob(job))[0]!.kind).toBe('retry');
    expect(await q.listPauses(db.pool)).toEqual([]);
    expect(runsOf(await e.processJob(job))[0]!.kind).toBe('retry'); // the third in a row
    const [pause] = await q.listPauses(db.pool);
    expect(pause).toMatchObject({
      scope: 'handler',
      name: 'flaky',
      actor: 'circuit-breaker',
      reason: expect.stringMatching(/^circuit breaker: 3 failed attempts in a row .*last error: Error: email API 503/),
    });
    // Paused: the next job does not run it.
    expect(runsOf(await e.processJob(job))).toEqual([{ kind: 'waiting', handler: 'flaky', reason: 'paused' }]);
    expect((await db.pool.query(`SELECT mode, actor FROM ${T.actions} WHERE target = 'handler:flaky'`)).rows).toEqual([{ mode: 'pause', actor: 'circuit-breaker' }]);
    await q.resume(db.pool, 'handler', 'flaky', 'alice', 'fixed');
    expect((await db.pool.query(`SELECT consecutive_failures FROM oncehook.handler_health WHERE handler = 'flaky'`)).rows).toEqual([{ consecutive_failures: 0 }]);
  });
});

describe('defineHandler checks its limits loudly', () => {
  const base = { name: 'h', source: 'stripe', type: TYPE } as const;
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['a limit of 0', { concurrency: 0 }, /concurrency must be a whole number from 1 to 10000 \(got 0\)/],
    ['a fractional limit', { concurrency: 1.5 }, /concurrency must be a whole number/],
    ['a key that is not a function', { concurrency: { key: 'customer', limit: 1 } }, /concurrency.key must be a function \(event\) => string/],
    ['a keyed limit of 0', { concurrency: { key: () => 'k', limit: 0 } }, /concurrency.limit must be a whole number from 1 to 10000/],
    ['an unknown concurrency key', { concurrency: { key: () => 'k', limit: 1, max: 2 } }, /concurrency has no "max"/],
    ['a negative rate', { rateLimit: { limit: -1, period: '1s' } }, /rateLimit.limit must be a whole number of runs from 1 to 100000 \(got -1\)/],
    ['a period typo', { rateLimit: { limit: 10, period: '1 sec' } }, /rateLimit.period must be a duration from 100ms to 24h, like '1s'/],
    ['a period too short', { rateLimit: { limit: 10, period: 10 } }, /rateLimit.period must be a duration from 100ms/],
    ['a rate key that is not a function', { rateLimit: { limit: 10, period: '1s', key: 1 } }, /rateLimit.key must be a function/],
    ['a priority typo', { priority: 'urgent' }, /priority must be "high", "normal" or "low" \(got "urgent"\)/],
    ['a breaker without its count', { circuitBreaker: {} }, /circuitBreaker must be \{ consecutiveFailures: N \}/],
    ['a breaker of 0', { circuitBreaker: { consecutiveFailures: 0 } }, /circuitBreaker must be/],
  ];
  for (const [what, options, message] of cases) {
    it(what, () => {
      expect(() => defineHandler({ ...base, ...options } as Parameters<typeof defineHandler>[0], async () => {})).toThrow(HandlerDefinitionError);
      expect(() => defineHandler({ ...base, ...options } as Parameters<typeof defineHandler>[0], async () => {})).toThrow(message);
    });
  }
  it('the accepted forms, normalised', () => {
    const h: Handler = defineHandler(
      { ...base, concurrency: 3, rateLimit: { limit: 10, period: '500ms' }, priority: 'low', circuitBreaker: { consecutiveFailures: 5 } },
      async () => {},
    );
    expect(h.limits).toEqual({ concurrency: { limit: 3 }, rateLimit: { limit: 10, periodMs: 500 }, breakerAfter: 5 });
    expect(h.priority).toBe('low');
    expect(defineHandler(base, async () => {}).limits).toBeUndefined();
  });
});
