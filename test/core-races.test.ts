/**
 * Races in the core, each interleaving forced deterministically (issue 23): one side holds its
 * transaction (or a statement) open at a chosen point until the other side is SEEN waiting on a
 * lock in pg_stat_activity, then lets go. No sleeps: every wait is for a visible condition.
 * Each test failed on the code before its fix; the mutant each one kills is named beside it
 * (scripts/mutants/catalog.ts).
 *
 * A. A takeover that waited on the old owner's step transaction reads the steps committed by it
 *    (acquireRun and acquireClaimableRuns: the steps are read after the lease is taken).
 * B. Two batched claims holding the same keys in opposite orders wait, never deadlock (event
 *    ids and body hashes); a claim statement that loses a race anyway is run again.
 * C. ctx.ordered's `previous` is the newest version committed before it, under contention.
 * D. The delivery log counts every delivery of a body deduplicated under two ids.
 * E. A local step longer than the lease: no renewal queues behind its row lock, and a taker
 *    that waited for it finds the lease live.
 * F. A duplicate whose event the key-horizon retention deletes mid-claim is claimed again.
 */
import { randomBytes } from 'node:crypto';
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { defineHandler } from '@oncehook/sdk';
import type { VerifiedEvent } from '@oncehook/shared';
import { processJob } from '@oncehook/core';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, lockWaiters, type TestDatabase, untilLockWaiters } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, startIngest, T, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
const anything = z.unknown();
/** Advisory lock keys the tests' gates wait on. */
const ROW_GATE = 7_230_001;
const STEP_GATE = 7_230_002;
const DELIVERY_GATE = 7_230_003;

beforeAll(async () => {
  db = await createTestDatabase();
  // B: a batch of `gate_` events parks before inserting its SECOND row, so two batches each
  // hold their first key when the gate opens.
  await db.pool.query(`CREATE FUNCTION test_second_row_gate() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE n int := coalesce(nullif(current_setting('test.rows', true), ''), '0')::int + 1;
    BEGIN
      PERFORM set_config('test.rows', n::text, true);
      IF NEW.event_id LIKE 'gate\\_%' AND n = 2 THEN PERFORM pg_advisory_xact_lock_shared(${ROW_GATE}); END IF;
      RETURN NEW;
    END $$`);
  await db.pool.query(`CREATE TRIGGER test_second_row_gate BEFORE INSERT ON ${T.events} FOR EACH ROW EXECUTE FUNCTION test_second_row_gate()`);
  // B: a claim of `evt_conflict_once` fails once with a deadlock, as if it had lost one.
  await db.pool.query('CREATE SEQUENCE test_conflict_once');
  await db.pool.query(`CREATE FUNCTION test_conflict_once() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.event_id = 'evt_conflict_once' AND nextval('test_conflict_once') = 1 THEN
        RAISE EXCEPTION 'deadlock detected (forced by the test)' USING ERRCODE = '40P01';
      END IF;
      RETURN NEW;
    END $$`);
  await db.pool.query(`CREATE TRIGGER test_conflict_once BEFORE INSERT ON ${T.events} FOR EACH ROW EXECUTE FUNCTION test_conflict_once()`);
  // F: a delivery-log insert for a gated event parks before it is written.
  await db.pool.query('CREATE TABLE test_delivery_gate (event_row_id bigint PRIMARY KEY)');
  await db.pool.query(`CREATE FUNCTION test_delivery_gate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM test_delivery_gate WHERE event_row_id = NEW.event_row_id) THEN PERFORM pg_advisory_xact_lock_shared(${DELIVERY_GATE}); END IF;
      RETURN NEW;
    END $$`);
  await db.pool.query(`CREATE TRIGGER test_delivery_gate BEFORE INSERT ON ${T.deliveries} FOR EACH ROW EXECUTE FUNCTION test_delivery_gate()`);
});
afterAll(async () => {
  await db.drop();
});

const untilWaiting = (n: number, what: string, like = '%') => untilLockWaiters(db.pool, n, what, like);

/** Holds advisory lock `key` on a connection of its own until the returned release is called. */
async function holdGate(key: number): Promise<() => Promise<void>> {
  const client: pg.PoolClient = await db.pool.connect();
  await client.query('SELECT pg_advisory_lock($1)', [key]);
  return async () => {
    await client.query('SELECT pg_advisory_unlock($1)', [key]);
    client.release();
  };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('A. a takeover reads the steps the previous owner committed while it waited', () => {
  /**
   * Worker A's lease has expired but no one has taken over, so A's fence still admits it; A is
   * inside its local step `apply`, holding the run row. B arrives and waits on that row. A
   * commits `apply`; B takes the lease. B must see `apply` as committed and skip it.
   */
  async function takeover(eventId: string, takerJob: (rowId: number) => Parameters<typeof processJob>[1]) {
    const rowId = await claimStripe(db.pool, eventId, 'test.takeover');
    let applies = 0;
    let notifies = 0;
    const expired = deferred();
    const insideApply = deferred();
    const commitApply = deferred();
    let calls = 0;
    const handler = defineHandler({ name: 'takeover', source: 'stripe', type: 'test.takeover', payload: anything }, async (_event, ctx) => {
      calls += 1;
      const call = calls;
      if (applies === 0) await expired.promise;
      await ctx.transaction('apply', async () => {
        applies += 1;
        if (applies === 1) {
          insideApply.resolve();
          await commitApply.promise;
        }
        return { applied: true };
      });
      // A holds back until B's lease statement has taken the run: otherwise A, scheduled
      // first after its COMMIT, may renew its still-unclaimed lease before B's UPDATE re-checks
      // the row, and B finds the lease live (correct, but not the takeover under test).
      if (call === 1) await waitFor(async () => ((await q.getRuns(db.pool, rowId))[0]?.attempts ?? 0) >= 2, { what: "B's lease statement took the run" });
      await ctx.step('notify', async () => {
        notifies += 1;
        return { sent: true };
      });
    });
    const a = processJob(engine(db.pool, [handler]), dispatchJob(rowId, eventId));
    const run = await waitFor(async () => (await q.getRuns(db.pool, rowId))[0], { what: 'the run created by the dispatch' });
    // A's lease expires (a GC pause, SIGSTOP): nothing holds the row at this point.
    await db.pool.query(`UPDATE ${T.runs} SET lease_until = now() - interval '1 second' WHERE id = $1`, [run.id]);
    expired.resolve();
    await insideApply.promise;

    const b = processJob(engine(db.pool, [handler]), takerJob(rowId));
    await untilWaiting(1, 'the taker blocked on the run row A holds');
    commitApply.resolve();
    const [outcomeA, outcomeB] = await Promise.all([a, b]);
    return { outcomeA, outcomeB, applies, notifies, steps: await q.getSteps(db.pool, run.id, 0) };
  }

  // Mutant killed: acquire-steps-in-returning (the steps read by the lease statement's RETURNING).
  it('acquireRun (a run job: a stalled job re-run, a reconciler reclaim)', async () => {
    const result = await takeover('evt_takeover_run', (rowId) => ({ rowId, source: 'stripe', eventId: 'evt_takeover_run', handler: 'takeover', generation: 0, attempt: 1 }));
    expect(result.outcomeA).toMatchObject({ kind: 'runs', runs: [{ kind: 'lease-lost' }] });
    expect(result.outcomeB).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    expect(result.applies).toBe(1);
    expect(result.notifies).toBe(1);
    expect(result.steps.map((s) => s.name).sort()).toEqual(['apply', 'notify']);
  });

  // Mutant killed: acquire-steps-in-returning.
  it('acquireClaimableRuns (a repeated dispatch job)', async () => {
    const result = await takeover('evt_takeover_dispatch', (rowId) => dispatchJob(rowId, 'evt_takeover_dispatch'));
    expect(result.outcomeB).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    expect(result.applies).toBe(1);
    expect(result.notifies).toBe(1);
  });
});

const event = (eventId: string, bodyHash: Buffer | null = null): VerifiedEvent => ({
  source: 'stripe',
  kind: 'stripe',
  eventId,
  type: 'test.claim',
  signedAt: null,
  rawBody: JSON.stringify({ id: eventId }),
  payload: {},
  meta: {},
  bodyHash,
});

/** A 32-byte body hash starting with `first` (so its claim stripe is first % 16). */
const hashStarting = (first: number) => Buffer.concat([Buffer.from([first]), randomBytes(31)]);

describe('B. batched claims take their locks in one order', () => {
  /** Two batches, each parked after its first row, released together. */
  async function opposite(first: VerifiedEvent[], second: VerifiedEvent[]) {
    const release = await holdGate(ROW_GATE);
    const claims = [q.claimEvents(db.pool, first), q.claimEvents(db.pool, second)];
    try {
      // Each batch is parked at the gate, or waiting for the other (ordered: the same first key).
      await untilWaiting(2, 'both batches blocked');
    } finally {
      await release();
    }
    const settled = await Promise.allSettled(claims);
    // Each batch's outcomes, or its error as text (a deadlock shows here).
    return settled.map((r) => (r.status === 'fulfilled' ? r.value.map((x) => x.outcome) : String(r.reason)));
  }

  // Mutant killed: claim-keys-unordered (rows inserted in the batch's arrival order).
  it('[k1, k2] and [k2, k1]: both answered, no deadlock', async () => {
    const [a, b] = await opposite([event('gate_k1'), event('gate_k2')], [event('gate_k2'), event('gate_k1')]);
    expect([a, b].every(Array.isArray), JSON.stringify([a, b])).toBe(true);
    expect([a, b].flat().filter((o) => o === 'new')).toHaveLength(2);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE event_id IN ('gate_k1', 'gate_k2')`);
    expect(rows[0]?.n).toBe(2);
  });

  // Mutant killed: claim-body-stripes-off (no stripe locks before the insert).
  it('two ids per body, the bodies in opposite orders (body dedupe): both answered, no deadlock', async () => {
    const [h1, h2] = [hashStarting(1), hashStarting(2)];
    const [a, b] = await opposite([event('gate_b1', h1), event('gate_b2', h2)], [event('gate_b3', h2), event('gate_b4', h1)]);
    expect([a, b].every(Array.isArray), JSON.stringify([a, b])).toBe(true);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE event_id LIKE 'gate\\_b%'`);
    expect(rows[0]?.n).toBe(2);
  });

  // Mutant killed: claim-conflict-not-retried.
  it('a claim statement that loses a race anyway is run again: the delivery is accepted, not failed', async () => {
    const prefix = testPrefix();
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    try {
      const response = await deliver(ingest.url, signStripe(paymentSucceeded('evt_conflict_once')));
      expect(response.status).toBe(202);
      expect(await q.getEventByKey(db.pool, 'stripe', 'evt_conflict_once')).not.toBeNull();
    } finally {
      await ingest.queue.obliterate({ force: true });
      await ingest.close();
    }
  });
});

describe('C. ctx.ordered under contention', () => {
  /** T1 records `first` and holds its transaction; T2 records `second` and waits; T1 commits. */
  async function contended(key: string, first: number, second: number) {
    const t1 = await db.pool.connect();
    const t2 = await db.pool.connect();
    try {
      await t1.query('BEGIN');
      const r1 = await q.recordObjectVersion(t1, 'ordered', key, first);
      await t2.query('BEGIN');
      const pending = q.recordObjectVersion(t2, 'ordered', key, second);
      await untilWaiting(1, 'T2 waiting for T1', `%${'object_versions'}%`);
      await t1.query('COMMIT');
      const r2 = await pending;
      await t2.query('COMMIT');
      return { r1, r2 };
    } finally {
      t1.release();
      t2.release();
    }
  }

  // Mutant killed: ordered-previous-from-snapshot.
  it('T1 applies 5 (uncommitted), T2 applies 7: T2 is not stale and its previous is 5', async () => {
    const { r1, r2 } = await contended('customer:c1', 5, 7);
    expect(r1).toEqual({ stale: false, previous: null });
    expect(r2).toEqual({ stale: false, previous: 5 });
  });

  it('1 recorded; T1 applies 9 (uncommitted), T2 applies 4: T2 is stale and its previous is 9', async () => {
    const t0 = await db.pool.connect();
    await q.recordObjectVersion(t0, 'ordered', 'customer:c2', 1);
    t0.release();
    const { r1, r2 } = await contended('customer:c2', 9, 4);
    expect(r1).toEqual({ stale: false, previous: 1 });
    expect(r2).toEqual({ stale: true, previous: 9 });
    const { rows } = await db.pool.query<{ version: string }>(`SELECT version::text FROM ${T.versions} WHERE handler = 'ordered' AND object_key = 'customer:c2'`);
    expect(rows[0]?.version).toBe('9');
  });
});

describe('D. the delivery log of a body deduplicated under two ids', () => {
  const deliveriesOf = async (eventId: string) =>
    (
      await db.pool.query<{ n: number; same: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE d.same_body)::int AS same FROM ${T.deliveries} d JOIN ${T.events} e ON e.id = d.event_row_id WHERE e.event_id = $1`,
        [eventId],
      )
    ).rows[0];

  // Mutant killed: claim-same-body-in-batch-unmatched.
  it('two ids with one body folded into one batch: answered new and duplicate, two deliveries logged', async () => {
    const hash = hashStarting(7);
    const results = await q.claimEvents(db.pool, [event('evt_fold_a', hash), event('evt_fold_b', hash)]);
    expect(results.map((r) => r.outcome)).toEqual(['new', 'duplicate']);
    expect(results[1]).toMatchObject({ sameBody: true });
    expect(await deliveriesOf('evt_fold_a')).toEqual({ n: 2, same: 1 });
  });

  it('a concurrent duplicate found by its body (another id) is logged once its event is committed', async () => {
    const hash = hashStarting(8);
    expect((await q.claimEvents(db.pool, [event('evt_late_a', hash)]))[0]?.outcome).toBe('new');
    await q.logDeliveries(db.pool, [{ source: 'stripe', eventId: 'evt_late_b', bodyHash: hash, copies: 2 }]);
    expect(await deliveriesOf('evt_late_a')).toEqual({ n: 3, same: 2 });
  });
});

describe('E. a local step longer than the lease', () => {
  // Mutants killed: step-lease-not-renewed (the step does not renew the lease it held past a
  // third), keeper-renews-during-step (renewals queue behind the step's row lock).
  it('no renewal waits on the row; a taker that waited on it finds the lease live; the run ends in one attempt', async () => {
    const leaseMs = 900;
    const rowId = await claimStripe(db.pool, 'evt_long_step', 'test.long');
    const inside = deferred();
    const handler = defineHandler({ name: 'long-step', source: 'stripe', type: 'test.long', payload: anything }, async (_event, ctx) => {
      await ctx.transaction('slow-sql', async (tx) => {
        inside.resolve();
        // An active statement that runs for as long as the test holds the gate.
        await tx.query('SELECT pg_advisory_xact_lock_shared($1)', [STEP_GATE]);
        return { ok: true };
      });
    });
    const release = await holdGate(STEP_GATE);
    let released = false;
    try {
      const a = processJob(engine(db.pool, [handler], { leaseMs }), dispatchJob(rowId, 'evt_long_step'));
      await inside.promise;
      const run = await waitFor(async () => (await q.getRuns(db.pool, rowId))[0], { what: 'the run' });
      // The lease lapses in the database while the step holds the row.
      await waitFor(
        async () => {
          const { rows } = await db.pool.query<{ lapsed: boolean }>(`SELECT lease_until < now() AS lapsed FROM ${T.runs} WHERE id = $1`, [run.id]);
          return rows[0]?.lapsed;
        },
        { timeoutMs: 20_000, intervalMs: 20, what: 'the lease to lapse in the database' },
      );
      const taker = q.acquireRun(db.pool, rowId, 'long-step', '00000000-0000-4000-8000-0000000000e1', 60_000);
      await untilWaiting(1, 'the taker blocked on the run row', '%lease_token = $3::uuid%');
      // Two keeper intervals more: a keeper that renews during the step has queued by now.
      const keeperTicks = Date.now() + (2 * leaseMs) / 3 + 100;
      await waitFor(() => Date.now() > keeperTicks, { intervalMs: 20, what: 'two keeper intervals' });
      expect(await lockWaiters(db.pool, '%SET lease_until%')).toBe(0);
      await release();
      released = true;
      expect(await taker).toBeNull();
      expect(await a).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
      expect((await q.getRuns(db.pool, rowId))[0]).toMatchObject({ state: 'done', attempts: 1 });
    } finally {
      if (!released) await release();
    }
  });
});

describe('F. a duplicate whose event the key-horizon retention deletes mid-claim', () => {
  // Mutant killed: claim-conflict-not-retried (the foreign key violation answered 500).
  it('is claimed again (202), not answered 500', async () => {
    const prefix = testPrefix();
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    const body = signStripe(paymentSucceeded('evt_horizon_race'));
    try {
      expect((await deliver(ingest.url, body)).status).toBe(202);
      const first = await q.getEventByKey(db.pool, 'stripe', 'evt_horizon_race');
      await db.pool.query('INSERT INTO test_delivery_gate VALUES ($1)', [first!.id]);
      const release = await holdGate(DELIVERY_GATE);
      let answer: ReturnType<typeof deliver>;
      try {
        answer = deliver(ingest.url, body);
        await untilWaiting(1, "the duplicate's delivery-log insert parked");
        // The key horizon passes for this event: retention deletes its row meanwhile.
        await db.pool.query(`DELETE FROM ${T.events} WHERE id = $1`, [first!.id]);
      } finally {
        await release();
      }
      expect((await answer).status).toBe(202);
      const again = await q.getEventByKey(db.pool, 'stripe', 'evt_horizon_race');
      expect(again?.id).not.toBe(first!.id);
    } finally {
      await ingest.queue.obliterate({ force: true });
      await ingest.close();
    }
  });
});
