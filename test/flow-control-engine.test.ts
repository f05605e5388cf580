/**
 * Flow control in process, over real Postgres (docs/flow-control.md): the gate's decisions and
 * their fences, forced interleavings of two workers at the last slot, the pause at each lease
 * statement, the circuit breaker, a key function's mistakes, and the admin API's pause.
 * The multi-process proofs (3 workers, kill -9, restarts) are in flow-control.test.ts.
 */
import { paymentSucceeded } from '@oncehook/harness';
import { createOperations, createReconciler, closeQueueConnection, type FollowUp, type JobOutcome } from '@oncehook/core';
import { defineHandler, HandlerDefinitionError, type Handler } from '@oncehook/sdk';
import { createFaults, createWorkerMetrics } from '@oncehook/shared';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, T, TRUNCATE_ALL, testLog, testPrefix, testQueues, testQueueStore } from './helpers/stack.js';

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

async function run(rowId: number, handler: string) {
  return (
    await db.pool.query<{ state: string; waiting: string | null; attempts: number; waits: number }>(
      `SELECT state, waiting, attempts, waits FROM ${T.runs} WHERE event_row_id = $1 AND handler = $2`,
      [rowId, handler],
    )
  ).rows[0]!;
}

describe('concurrency', () => {
  it('the last slot, taken by two workers at once: exactly one leases it, the other waits (not an attempt) and is woken when the slot frees', async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    let entered = 0;
    const h = defineHandler({ name: 'one-at-a-time', source: 'stripe', type: TYPE, concurrency: 1 }, async () => {
      entered += 1;
      await hold;
    });
    const a = await newEvent();
    const b = await newEvent();
    // Each gate stops for 300 ms after counting, before its lease: without the slot's lock both
    // would count 0 and both lease.
    const faults = createFaults('worker.gate-after-count:delay=300');
    const e1 = engine(db.pool, [h], {}, { faults });
    const e2 = engine(db.pool, [h], {}, { faults });
    // Both dispatches race for the one slot.
    const first = e1.processJob(dispatchJob(a.rowId, a.eventId));
    const second = e2.processJob(dispatchJob(b.rowId, b.eventId));
    const settled = await Promise.race([first.then(() => 'a'), second.then(() => 'b'), new Promise((r) => setTimeout(() => r('none'), 5_000))]);
    expect(settled).not.toBe('none'); // one of them waits and returns at once
    expect(entered).toBe(1);
    const waiter = settled === 'a' ? a : b;
    const holder = settled === 'a' ? b : a;
    const waited = await (settled === 'a' ? first : second);
    expect(runsOf(waited)).toEqual([{ kind: 'waiting', handler: 'one-at-a-time', reason: 'concurrency' }]);
    expect(await run(waiter.rowId, 'one-at-a-time')).toMatchObject({ state: 'received', waiting: 'concurrency', attempts: 0, waits: 1 });
    // Its next look is scheduled with the fence it was given.
    expect(followOf(waited)).toEqual([
      { job: expect.objectContaining({ rowId: waiter.rowId, handler: 'one-at-a-time', wait: 1 }), delayMs: expect.any(Number), priority: undefined },
    ]);

    release();
    const done = await (settled === 'a' ? second : first);
    expect(runsOf(done)).toMatchObject([{ kind: 'done' }]);
    // The slot freed: the waiter is woken at once (its fence bumped: the poll job is now stale).
    expect(followOf(done)).toEqual([{ job: expect.objectContaining({ rowId: waiter.rowId, handler: 'one-at-a-time', wait: 2 }), priority: undefined }]);
    expect((await run(waiter.rowId, 'one-at-a-time')).waits).toBe(2);
    void holder;

    // The stale poll job (wait 1) does nothing and schedules nothing; the wake-up runs it.
    const stale = await e1.processJob({ ...followOf(waited)[0]!.job });
    expect(runsOf(stale)).toMatchObject([{ kind: 'done' }]); // the slot is free: a stale job may still lease (the lease is guarded)...
    const woken = await e1.processJob({ ...followOf(done)[0]!.job });
    expect(runsOf(woken)).toEqual([{ kind: 'skipped', handler: 'one-at-a-time' }]); // ...and the other then finds it done
    expect(entered).toBe(2);
    expect(await run(waiter.rowId, 'one-at-a-time')).toMatchObject({ state: 'done', attempts: 1 });
  });

  it('a stale job of a waiting run never starts a second chain of jobs', async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    const h = defineHandler({ name: 'slot', source: 'stripe', type: TYPE, concurrency: 1 }, async () => hold);
    const a = await newEvent();
    const b = await newEvent();
    const e = engine(db.pool, [h]);
    const holding = e.processJob(dispatchJob(a.rowId, a.eventId));
    await new Promise((r) => setTimeout(r, 200));
    const waited = await e.processJob(dispatchJob(b.rowId, b.eventId));
    const poll = followOf(waited)[0]!.job;
    expect(poll.wait).toBe(1);
    // The poll comes while the slot is still taken: it waits again, with the next fence...
    const again = await e.processJob(poll);
    expect(followOf(again)).toEqual([expect.objectContaining({ job: expect.objectContaining({ wait: 2 }) })]);
    // ...and a duplicate of the old poll (recovery, a redelivered job) schedules nothing.
    const duplicate = await e.processJob(poll);
    expect(runsOf(duplicate)).toEqual([{ kind: 'skipped', handler: 'slot' }]);
    expect(followOf(duplicate)).toEqual([]);
    release();
    await holding;
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
    expect(runsOf(await e.processJob({ rowId: b.rowId, provider: 'stripe', eventId: b.eventId, handler: 'leased', attempt: 0, wait: 1 }))).toMatchObject([{ kind: 'done' }]);
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
    expect(runsOf(await e.processJob({ rowId: events[0]!.rowId, provider: 'stripe', eventId: events[0]!.eventId, handler: 'rated', attempt: 1 }))).toEqual([
      { kind: 'skipped', handler: 'rated' },
    ]);
    expect((await db.pool.query(`SELECT started FROM oncehook.rate_windows WHERE handler = 'rated'`)).rows).toEqual([{ started: 1 }]);
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
