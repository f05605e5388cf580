/**
 * The worker's state machine and the fence, in process, over real Postgres and Redis.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { noFaults, PermanentError, queries, type EventRow } from '@oncehook/shared';
import { HandlerRegistry } from '../apps/worker/src/handlers';
import { processEvent } from '../apps/worker/src/process-event';
import { createTestDatabase, type TestDatabase } from './helpers/db';
import { exampleRegistry, ledgerSummary, startIngest, startWorker, testLog, testPrefix, type IngestHandle, type WorkerHandle } from './helpers/stack';
import { deliver, paymentSucceeded, signStripe } from './helpers/stripe';
import { waitFor } from './helpers/wait';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('TRUNCATE webhook_events, ledger_entries, ledger_accounts CASCADE');
});

/** Claims an event row directly, as ingest would. */
async function claim(eventId: string, type = 'payment_intent.succeeded', extra: Record<string, unknown> = {}): Promise<number> {
  const payload = { ...paymentSucceeded(eventId, { account: 'cus_sm', amount: 500 }), type, ...extra };
  const result = await queries.claimEvent(db.pool, {
    provider: 'stripe',
    kind: 'stripe',
    eventId,
    type,
    signedAt: new Date(),
    rawBody: JSON.stringify(payload),
    payload,
    meta: {},
  });
  if (result.outcome !== 'new') throw new Error('expected a new claim');
  return result.rowId;
}

async function row(rowId: number): Promise<EventRow> {
  const r = await queries.getEvent(db.pool, rowId);
  if (!r) throw new Error(`row ${rowId} missing`);
  return r;
}

describe('the fence', () => {
  it('a worker whose lease expired and was taken over cannot commit its step or mark done', async () => {
    const rowId = await claim('evt_fence');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let stepRuns = 0;

    // Worker A: its handler stalls (a GC pause, a hung socket) past its lease.
    const slowRegistry = new HandlerRegistry().on('stripe', 'payment_intent.succeeded', async (_event, ctx) => {
      entered();
      await gate;
      await ctx.transaction('credit', async (tx) => {
        stepRuns += 1;
        await tx.query(`INSERT INTO ledger_accounts (id, balance_cents) VALUES ('cus_sm', 500)`);
        return null;
      }, { completesEvent: true });
    });
    // Lease renewal is every leaseMs/3; a long lease keeps A's keeper quiet while we expire it by hand.
    const settings = { leaseMs: 60_000, maxAttempts: 5 };
    const a = processEvent({ pool: db.pool, registry: slowRegistry, log: testLog, faults: noFaults, settings }, { rowId, provider: 'stripe', eventId: 'evt_fence', attempt: 0 });
    await inside;
    const leaseA = (await row(rowId)).leaseToken;

    // A's lease expires; worker B takes the event over and finishes it.
    await db.pool.query(`UPDATE webhook_events SET lease_until = now() - interval '1 second' WHERE id = $1`, [rowId]);
    const ledgerRegistry = exampleRegistry();
    const b = await processEvent({ pool: db.pool, registry: ledgerRegistry, log: testLog, faults: noFaults, settings }, { rowId, provider: 'stripe', eventId: 'evt_fence', attempt: 0 });
    expect(b.kind).toBe('done');
    const afterB = await row(rowId);
    expect(afterB).toMatchObject({ state: 'done', attempts: 2, leaseToken: null });

    // A wakes up: its step must not run, nor its done transition land.
    release();
    expect(await a).toEqual({ kind: 'lease-lost', rowId, type: 'payment_intent.succeeded' });
    expect(stepRuns).toBe(0);
    expect(await queries.markDone(db.pool, rowId, leaseA!)).toBe(false);
    expect((await ledgerSummary(db.pool)).entries).toBe(1);
    expect((await row(rowId)).finishedAt?.getTime()).toBe(afterB.finishedAt?.getTime());
  });

  it('a takeover waits for an in-flight step transaction and then sees the step committed', async () => {
    // The fence holds the row lock until COMMIT: a concurrent takeover cannot slip in between
    // the lease check and the commit.
    const rowId = await claim('evt_fence_lock');
    const token = '00000000-0000-4000-8000-000000000001';
    // A 1 ms lease: expired by the time anyone else looks, yet our fence still holds the lock.
    expect(await queries.acquireLease(db.pool, rowId, token, 1)).not.toBeNull();
    const tx = await db.pool.connect();
    await tx.query('BEGIN');
    expect(await queries.lockLeasedEvent(tx, rowId, token)).toEqual({ generation: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The takeover sees an expired lease, and blocks on our row lock.
    let tookOver: EventRow | null | undefined;
    const takeover = (async () => {
      const other = await db.pool.connect();
      try {
        await other.query(`SET lock_timeout = '5s'`);
        tookOver = await queries.acquireLease(other, rowId, '00000000-0000-4000-8000-000000000002', 60_000);
      } finally {
        other.release();
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(tookOver).toBeUndefined(); // still blocked
    expect(await queries.markDone(tx, rowId, token)).toBe(true);
    await tx.query('COMMIT');
    tx.release();
    await takeover;
    expect(tookOver).toBeNull(); // re-checked after our commit: the event is done
  });
});

describe('handler outcomes', () => {
  let ingest: IngestHandle;
  let worker: WorkerHandle;
  const calls = new Map<string, number>();
  const stepOneRuns = new Map<string, number>();

  beforeAll(async () => {
    const prefix = testPrefix();
    const registry = exampleRegistry();
    registry.on('stripe', 'test.flaky', async (event, ctx) => {
      const n = (calls.get(event.eventId) ?? 0) + 1;
      calls.set(event.eventId, n);
      await ctx.transaction('one', async () => {
        stepOneRuns.set(event.eventId, (stepOneRuns.get(event.eventId) ?? 0) + 1);
        return { at: n };
      });
      if (n < 3) throw new Error(`flaky failure ${n}`);
    });
    registry.on('stripe', 'test.always_fails', async () => {
      throw new Error('downstream is broken');
    });
    registry.on('stripe', 'test.permanent', async () => {
      throw new PermanentError('customer record is invalid');
    });
    ingest = await startIngest({ pool: db.pool, prefix });
    worker = startWorker({ pool: db.pool, prefix, registry, settings: { maxAttempts: 4, retryBackoffMs: 10 } });
  });
  afterAll(async () => {
    await worker.close();
    await ingest.close();
  });

  async function finished(eventId: string): Promise<EventRow> {
    return waitFor(async () => {
      const r = await queries.getEventByKey(db.pool, 'stripe', eventId);
      return r && (r.state === 'done' || r.state === 'failed') ? r : null;
    }, { what: `${eventId} finished` });
  }

  it('a transient error is retried; a committed step is not re-run on the retry', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_flaky'), type: 'test.flaky' }));
    const r = await finished('evt_flaky');
    expect(r).toMatchObject({ state: 'done', attempts: 3, lastError: 'Error: flaky failure 2' });
    expect(calls.get('evt_flaky')).toBe(3);
    expect(stepOneRuns.get('evt_flaky')).toBe(1);
  });

  it('retries exhausted -> failed, with the error recorded', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_broken'), type: 'test.always_fails' }));
    const r = await finished('evt_broken');
    expect(r.state).toBe('failed');
    expect(r.attempts).toBe(4);
    expect(r.lastError).toBe('attempt 4/4 failed: Error: downstream is broken');
  });

  it('a PermanentError -> failed on the first attempt', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_perm'), type: 'test.permanent' }));
    const r = await finished('evt_perm');
    expect(r).toMatchObject({ state: 'failed', attempts: 1, lastError: 'PermanentError: customer record is invalid' });
  });

  it('an unknown event type is recorded as done with a note, not retried', async () => {
    await deliver(ingest.url, signStripe({ ...paymentSucceeded('evt_unknown'), type: 'customer.created' }));
    const r = await finished('evt_unknown');
    expect(r).toMatchObject({ state: 'done', attempts: 1 });
    expect(r.note).toMatch(/no handler registered for stripe "customer.created"/);
  });

  it('the example credits the ledger once and completes the event in the same transaction', async () => {
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_ledger', { account: 'cus_l', amount: 777 })));
    const r = await finished('evt_ledger');
    expect(r.state).toBe('done');
    const { rows } = await db.pool.query(`SELECT name, result FROM webhook_event_steps WHERE event_row_id = $1`, [r.id]);
    expect(rows).toEqual([{ name: 'credit-ledger', result: { entryId: expect.any(Number), accountId: 'cus_l', amount: 777 } }]);
    expect((await ledgerSummary(db.pool)).perEvent.get('evt_ledger')).toBe(1);
  });

  it('a malformed payment event is dead-lettered, not retried', async () => {
    const bad = paymentSucceeded('evt_bad_pi');
    delete (bad.data.object as Partial<typeof bad.data.object>).customer;
    await deliver(ingest.url, signStripe(bad));
    const r = await finished('evt_bad_pi');
    expect(r).toMatchObject({ state: 'failed', attempts: 1 });
    expect((await ledgerSummary(db.pool)).entries).toBe(0);
  });
});
