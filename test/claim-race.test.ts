/**
 * The claim race, made deterministic. A test-only trigger parks every INSERT into the event
 * table on an advisory lock that the test holds, so two claims of one key are BOTH past
 * anything they check before inserting when the gate opens. A check-then-act claim (look for
 * the key, then insert) fails here every time; `INSERT ... ON CONFLICT DO NOTHING` answers
 * one `new` and one duplicate. (test/concurrent-duplicates.test.ts is the timing-based
 * version through real HTTP.) Mutant killed: claim-check-then-act.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '@oncehook/harness';
import type { VerifiedEvent } from '@oncehook/shared';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { q, T } from './helpers/stack.js';

let db: TestDatabase;
const GATE = 424_242;

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
