/**
 * Real crashes at the points that matter, with real processes:
 * - kill -9 of a worker in the middle of a handler (inside the step transaction, before
 *   COMMIT): another worker finishes the event after the lease expires; credited once.
 * - ingest killed between the claim's commit and the enqueue: the reconciler enqueues it (on
 *   QUEUE_BACKEND=postgres there is no such window: the claim's statement inserts the job).
 * - SIGTERM during a handler: the worker finishes the job, then exits 0.
 * Recovery times are printed (`[figure] ...`) for the issue notes.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { killAllServices, spawnService } from '@oncehook/harness';
import { closeQueueConnection, jobIdFor, queueSchemaFor } from '@oncehook/core';
import { ingestUrl, ledgerSummary, q, testEnv, startIngest, testPrefix, testQueueStore, testQueues, T, onlyRun, TEST_QUEUE_BACKEND } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { waitFor } from '@oncehook/harness';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
// Every process a test started is gone before the next test, even when the test failed: a
// leftover worker's reconciler shares this file's database and would run the next test's events.
afterEach(async () => {
  await killAllServices();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events}, ledger_entries, ledger_accounts CASCADE`);
});

/** Waits for the event to be done; returns its one handler run. */
async function doneRun(eventId: string, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const found = await onlyRun(db.pool, 'stripe', eventId).catch(() => null);
      return found?.event.state === 'done' ? found.run : null;
    },
    { timeoutMs, what: `${eventId} done` },
  );
}

it('kill -9 of a worker mid-handler: another worker finishes after the lease expires, credited once', async () => {
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    // Worker A stalls inside the step transaction (domain writes done, not committed).
    const a = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_FAULTS: 'worker.step-before-commit:delay=60000' } }));
    await a.waitFor(/worker ready/);
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_kill9', { account: 'cus_k', amount: 1234 })))).status).toBe(202);
    await a.waitFor(/oncehook-fault worker.step-before-commit/);

    // Worker B is up and idle; A holds the lease.
    const b = spawnService('worker', testEnv({ databaseUrl: db.url, prefix }));
    await b.waitFor(/worker ready/);
    expect((await q.getEventByKey(db.pool, 'stripe', 'evt_kill9'))?.state).toBe('processing');

    const killedAt = Date.now();
    await a.kill9();
    const run = await doneRun('evt_kill9');
    const recoveryMs = Date.now() - killedAt;
    console.log(`[figure] kill -9 mid-handler -> done by another worker in ${recoveryMs} ms (LEASE_MS=2000, RECONCILE_INTERVAL_MS=200)`);

    expect(run.attempts).toBe(2);
    const ledger = await ledgerSummary(db.pool);
    expect(ledger.entries).toBe(1);
    expect(ledger.balance).toBe(1234);
    // The database says done; B's log line may still be in the pipe: wait for it.
    await b.waitFor(/"eventId":"evt_kill9".*"msg":"run done"/, 5_000);
    await b.stop();
  } finally {
    await ingest.close();
  }
});

/** The jobs waiting in the Postgres queue's table (QUEUE_BACKEND=postgres), by id. */
async function readyJobIds(prefix: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(`SELECT id FROM "${queueSchemaFor(prefix)}".ready ORDER BY id`);
  return rows.map((row) => row.id);
}

it('ingest killed between commit and enqueue: the event still finishes (Redis: via the reconciler; Postgres: its job committed with it)', async () => {
  const prefix = testPrefix();
  const ingest = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_FAULTS: 'ingest.after-claim:crash' } }));
  const url = await ingestUrl(ingest);
  // The process dies before answering: the provider sees a dropped connection and would retry.
  await expect(deliver(url, signStripe(paymentSucceeded('evt_ingest_crash', { account: 'cus_i', amount: 99 })))).rejects.toThrow();
  const { signal } = await ingest.exited;
  expect(signal).toBe('SIGKILL');
  const stored = await q.getEventByKey(db.pool, 'stripe', 'evt_ingest_crash');
  expect(stored?.state).toBe('received'); // committed
  const job = jobIdFor({ source: 'stripe', eventId: 'evt_ingest_crash', attempt: 0 });

  if (TEST_QUEUE_BACKEND === 'postgres') {
    // Insert on claim: the claim's statement wrote the dispatch job with the event, so the
    // crash lost nothing, and a worker whose reconciler would re-enqueue only after 10 minutes
    // runs it at once.
    expect(await readyJobIds(prefix)).toEqual([job]);
    const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { REQUEUE_AFTER_MS: '600000' } }));
    await doneRun('evt_ingest_crash');
    expect(worker.lines.join('\n')).not.toMatch(/re-enqueued/);
    expect((await ledgerSummary(db.pool)).perEvent.get('evt_ingest_crash')).toBe(1);
    await worker.stop();
    return;
  }
  // Never enqueued: the reconciler's to find.
  const startedAt = Date.now();
  const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix }));
  await doneRun('evt_ingest_crash');
  console.log(`[figure] ingest crash after commit -> done via reconciler in ${Date.now() - startedAt} ms from worker start (REQUEUE_AFTER_MS=500)`);
  await worker.waitFor(/re-enqueued \(received but not picked up\)/, 5_000);
  expect((await ledgerSummary(db.pool)).perEvent.get('evt_ingest_crash')).toBe(1);
  await worker.stop();
});

it('ingest killed after the answer, before the enqueue: acknowledged, and still finished (Redis: via the reconciler; Postgres: no relay to crash in, the job is there at the answer)', async () => {
  const prefix = testPrefix();
  const ingest = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_FAULTS: 'ingest.before-enqueue:crash' } }));
  const url = await ingestUrl(ingest);
  // The answer goes out before the relay adds the job (Redis is not on the answer's path)...
  const answer = await deliver(url, signStripe(paymentSucceeded('evt_relay_crash', { account: 'cus_r', amount: 7 })));
  expect(answer.status).toBe(202);
  if (TEST_QUEUE_BACKEND === 'postgres') {
    // ...except on Postgres, where the claim inserted the job in its own statement: at the
    // answer it is committed, and the relay has nothing to add (the fault in its add never
    // fires: the process lives).
    expect(await readyJobIds(prefix)).toEqual([jobIdFor({ source: 'stripe', eventId: 'evt_relay_crash', attempt: 0 })]);
    const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { REQUEUE_AFTER_MS: '600000' } }));
    await doneRun('evt_relay_crash');
    expect(ingest.proc.exitCode).toBeNull();
    expect(ingest.lines.join('\n')).not.toMatch(/oncehook-fault ingest.before-enqueue/);
    expect((await ledgerSummary(db.pool)).perEvent.get('evt_relay_crash')).toBe(1);
    await worker.stop();
    return;
  }
  // ...and the process dies right after, with the job never added.
  const { signal } = await ingest.exited;
  expect(signal).toBe('SIGKILL');
  expect((await q.getEventByKey(db.pool, 'stripe', 'evt_relay_crash'))?.state).toBe('received');

  const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix }));
  await doneRun('evt_relay_crash');
  await worker.waitFor(/re-enqueued \(received but not picked up\)/, 5_000);
  expect((await ledgerSummary(db.pool)).perEvent.get('evt_relay_crash')).toBe(1);
  await worker.stop();
});

it('SIGTERM during a handler: the worker finishes the in-flight job, then exits 0', async () => {
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    const worker = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_FAULTS: 'worker.in-handler:delay=1500' } }));
    await worker.waitFor(/worker ready/);
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_sigterm', { account: 'cus_t', amount: 5 })));
    await worker.waitFor(/oncehook-fault worker.in-handler/);
    const code = await worker.stop();
    expect(code).toBe(0);
    const found = await onlyRun(db.pool, 'stripe', 'evt_sigterm');
    expect(found?.event.state).toBe('done');
    expect(found?.run.attempts).toBe(1);
    expect((await ledgerSummary(db.pool)).entries).toBe(1);
  } finally {
    await ingest.close();
  }
});

it('SIGTERM during a delivery: ingest answers it (202), adds its job, then exits 0', async () => {
  const prefix = testPrefix();
  // The relay's add is still pending when the server has closed (it waits 800 ms before the
  // add): only the shutdown's flush adds the job before the queue closes.
  const ingest = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_FAULTS: 'ingest.after-claim:delay=1000,ingest.before-enqueue:delay=800' } }));
  const url = await ingestUrl(ingest);
  const pending = deliver(url, signStripe(paymentSucceeded('evt_ingest_sigterm')));
  await ingest.waitFor(/oncehook-fault ingest.after-claim/);
  ingest.proc.kill('SIGTERM');
  expect((await pending).status).toBe(202);
  expect((await ingest.exited).code).toBe(0);
  expect((await q.getEventByKey(db.pool, 'stripe', 'evt_ingest_sigterm'))?.state).toBe('received');
  // The relay was flushed before the queue closed: the job is there, not left to the reconciler.
  const store = testQueueStore(db.url, prefix);
  const queues = testQueues(store, prefix);
  const job = { source: 'stripe', eventId: 'evt_ingest_sigterm', attempt: 0 };
  try {
    expect(await queues.forJob(job).getJob(jobIdFor(job))).toBeDefined();
  } finally {
    for (const queue of queues.shards) await queue.obliterate({ force: true });
    await queues.close();
    await closeQueueConnection(store);
  }
});
