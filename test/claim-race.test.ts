/**
 * The claim race, made deterministic. A test-only trigger parks every INSERT into the event
 * table on an advisory lock that the test holds, so two claims of one key are BOTH past
 * anything they check before inserting when the gate opens. A check-then-act claim (look for
 * the key, then insert) fails here every time; `INSERT ... ON CONFLICT DO NOTHING` answers
 * one `new` and one duplicate. (test/concurrent-duplicates.test.ts is the timing-based
 * version through real HTTP.) Mutant killed: claim-check-then-act. And the delivery log's bound
 * under concurrent duplicates, parked the same way at their first log row.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '@oncehook/harness';
import { DELIVERY_LOG_ROWS } from '@oncehook/core';
import type { VerifiedEvent } from '@oncehook/shared';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { q, T } from './helpers/stack.js';

let db: TestDatabase;
const GATE = 424_242;
/** Where the delivery-log test parks its claims: at their first log row. */
const LOG_GATE = 424_243;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`CREATE FUNCTION test_claim_gate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${GATE}); RETURN NEW; END $$`);
  await db.pool.query(`CREATE TRIGGER test_claim_gate BEFORE INSERT ON ${T.events} FOR EACH ROW EXECUTE FUNCTION test_claim_gate()`);
});
afterAll(async () => {
  await db.drop();
});

const event = (eventId: string): VerifiedEvent => ({ source: 'stripe', kind: 'stripe', eventId, type: 't', signedAt: null, rawBody: '{}', payload: {}, meta: {} });

async function interleaved<T>(claims: () => Promise<T>[]): Promise<T[]> {
  const gate = await db.pool.connect();
  try {
    await gate.query('SELECT pg_advisory_lock($1)', [GATE]);
    const pending = claims();
    // Both statements have started and are parked at the gate, inside their INSERT.
    await waitFor(
      async () => {
        const { rows } = await gate.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [GATE]);
        return rows[0]?.n === 2;
      },
      { timeoutMs: 10_000, intervalMs: 20, what: 'both claims parked at the gate' },
    );
    await gate.query('SELECT pg_advisory_unlock($1)', [GATE]);
    return await Promise.all(pending);
  } finally {
    gate.release();
  }
}

async function rows(eventId: string): Promise<number> {
  const { rows: r } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE event_id = $1`, [eventId]);
  return r[0]?.n ?? -1;
}

it('two batched claims of one key, forced to interleave: one new, one duplicate, one row', async () => {
  const results = await interleaved(() => [q.claimEvents(db.pool, [event('evt_race_batch')]), q.claimEvents(db.pool, [event('evt_race_batch')])]);
  expect(results.map((r) => r[0]?.outcome).sort()).toEqual(['duplicate-concurrent', 'new']);
  expect(await rows('evt_race_batch')).toBe(1);
});

it('two single claims of one key, forced to interleave: one new, one duplicate, one row', async () => {
  const results = await interleaved(() => [q.claimEvent(db.pool, event('evt_race_single')), q.claimEvent(db.pool, event('evt_race_single'))]);
  expect(results.map((r) => r.outcome).sort()).toEqual(['duplicate-concurrent', 'new']);
  expect(await rows('evt_race_single')).toBe(1);
});

// Mutant killed: delivery-log-count-unlocked.
it(`duplicates of one event from concurrent claims, forced to interleave between their count and their log rows: the log keeps ${DELIVERY_LOG_ROWS} rows and the counter every duplicate (each claim counts the log under the event's lock, after the claim before it committed)`, async () => {
  // The event with 95 deliveries logged (its first and 94 duplicates), and no counter row: the
  // log holds them all.
  await q.claimEvents(db.pool, [event('evt_log_bound')], { copies: [95] });
  const { rows: ids } = await db.pool.query<{ id: string }>(`SELECT id FROM ${T.events} WHERE event_id = 'evt_log_bound'`);
  const rowId = ids[0]!.id;
  const logRows = async () => (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.deliveries} WHERE event_row_id = $1`, [rowId])).rows[0]!.n;
  const counter = async () => (await db.pool.query<{ duplicates: string }>(`SELECT duplicates FROM ${T.deliveryCounts} WHERE event_row_id = $1`, [rowId])).rows[0]?.duplicates;
  expect(await logRows()).toBe(95);
  expect(await counter()).toBeUndefined();
  // Without a counter row its deliveries are its log's rows (the event page and the lists).
  const shown = await q.showEvent(db.pool, Number(rowId));
  expect(shown?.deliveryCount).toBe(95);
  expect(shown?.lastDeliveryAt).toBeInstanceOf(Date);
  expect((await q.listEvents(db.pool, { source: 'stripe', limit: 50 })).find((e) => e.eventId === 'evt_log_bound')?.deliveries).toBe(95);
  // Six claims of 5 duplicates each park at their first log row, after their count.
  await db.pool.query(`CREATE FUNCTION test_log_gate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${LOG_GATE}); RETURN NEW; END $$`);
  await db.pool.query(`CREATE TRIGGER test_log_gate BEFORE INSERT ON ${T.deliveries} FOR EACH ROW EXECUTE FUNCTION test_log_gate()`);
  const gate = await db.pool.connect();
  try {
    await gate.query('SELECT pg_advisory_lock($1)', [LOG_GATE]);
    const claims = Array.from({ length: 6 }, () => q.claimEvents(db.pool, [event('evt_log_bound')], { copies: [5] }));
    // All six wait on an advisory lock: at the gate (a claim that counted), or on the event's
    // log lock (behind the one that holds it).
    await waitFor(
      async () => {
        const { rows } = await gate.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        return rows[0]?.n === 6;
      },
      { timeoutMs: 10_000, intervalMs: 20, what: 'six claims waiting' },
    );
    await gate.query('SELECT pg_advisory_unlock($1)', [LOG_GATE]);
    const results = await Promise.all(claims);
    expect(results.flat().map((r) => r.outcome)).toEqual(Array(6).fill('duplicate'));
  } finally {
    gate.release();
    await db.pool.query(`DROP TRIGGER test_log_gate ON ${T.deliveries}; DROP FUNCTION test_log_gate()`);
  }
  expect(await logRows()).toBe(DELIVERY_LOG_ROWS);
  // Every duplicate counted once the log was full: the 94 before and the 30 after.
  expect(Number(await counter())).toBe(94 + 30);
  expect((await q.showEvent(db.pool, Number(rowId)))?.deliveryCount).toBe(125);
});
