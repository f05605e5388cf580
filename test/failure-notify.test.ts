/**
 * A new failure group is counted, logged and notified once (issue 33): runs failed through the
 * engine's real path (MARK_RUN_FAILED writes their error's shape), then reconciler passes with
 * FAILURE_NOTIFY_URL pointing at a real HTTP receiver that checks the Standard Webhooks
 * signature with the `standardwebhooks` library. The first try is answered 503: the next pass
 * tries again under the SAME webhook-id; then no pass notifies it again. Resolved, then failing
 * again: a second opening, a second notification. The configuration refuses a URL without its
 * secret, and a link-local one. Ten notifications to a receiver that does not answer are sent at
 * once, and the pass that opened them does not wait for them (issue 63, F8).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createEngineEvents,
  createEventQueue,
  HandlerRegistry,
  subscribeWorkerMetrics,
  createOperations,
  createReconciler,
  createRedis,
  type EventQueue,
  NOTIFY_TIMEOUT_MS,
  type Reconciler,
  destinationHmacKey,
} from '@oncehook/core';
import { REDIS_URL, waitFor } from '@oncehook/harness';
import { defineHandler, PermanentError } from '@oncehook/sdk';
import { createWorkerMetrics } from '@oncehook/shared';
import type { Redis } from 'ioredis';
import { loadWorkerConfig } from 'oncehook';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, testLog, testPrefix } from './helpers/stack.js';

const SECRET = `whsec_${Buffer.from('failure-notify-test-key-32-bytes').toString('base64')}`;
let db: TestDatabase;
let redis: Redis;
let queue: EventQueue;
let receiver: Server;
let url: string;
const received: { headers: IncomingHttpHeaders; body: string; status: number }[] = [];
let answers: number[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  redis = createRedis(REDIS_URL, 'producer');
  queue = createEventQueue(redis, testPrefix());
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      const status = answers.shift() ?? 204;
      received.push({ headers: req.headers, body, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/oncehook-failures`;
});
afterAll(async () => {
  await new Promise((resolve) => receiver.close(resolve));
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
  await db.drop();
});

const charge = defineHandler({ name: 'charge-card', source: 'stripe', type: 'invoice.paid' }, async (event) => {
  throw new PermanentError(`card API answered 422: currency not supported for invoice ${event.eventId} (${Math.floor(Math.random() * 1e6)})`);
});

async function failRuns(ids: string[]): Promise<void> {
  const e = engine(db.pool, [charge]);
  for (const id of ids) {
    const rowId = await claimStripe(db.pool, id, 'invoice.paid');
    await e.processJob(dispatchJob(rowId, id));
    await e.processJob({ rowId, source: 'stripe', eventId: id, handler: 'charge-card', generation: 0, attempt: 0 });
  }
}

function verified(entry: { headers: IncomingHttpHeaders; body: string }): { type: string; data: { id: string; handler: string; shape: string; runs: number; url?: string } } {
  const headers = Object.fromEntries(Object.entries(entry.headers).map(([k, v]) => [k, String(v)]));
  return new Webhook(SECRET).verify(entry.body, headers) as never;
}

it('a new group is counted and notified once, signed; a refused try is tried again under the same id; a group failing again after its resolution is notified again', async () => {
  await failRuns(['in_a1', 'in_a2', 'in_a3']);
  expect((await q.failureGroups(db.pool)).map((g) => [g.handler, g.shape, g.failed])).toEqual([
    ['charge-card', 'PermanentError: card API answered 422: currency not supported for invoice <id> (#)', 3],
  ]);
  const metrics = createWorkerMetrics({ defaultMetrics: false });
  const settings = { intervalMs: 1_000, requeueAfterMs: 60_000, batchSize: 100 };
  // As in a worker: the pass is reported on the engine's events, where the metrics listen.
  const events = createEngineEvents(testLog);
  subscribeWorkerMetrics(events, metrics, new HandlerRegistry([]));
  const reconciler: Reconciler = createReconciler({
    pool: db.pool,
    queries: q,
    queue,
    log: testLog,
    settings,
    metrics,
    events,
    failureNotify: { url, hmacKey: destinationHmacKey(SECRET), adminUrl: 'https://ops.example.com' },
  });
  // A pass wakes the notifier; its round runs apart from the pass: wait for both.
  const pass = async () => {
    await reconciler.runOnce();
    await reconciler.notifier!.idle();
  };
  const opened = async () => (await metrics.failureGroupsOpened.get()).values.find((v) => v.labels.handler === 'charge-card')?.value ?? 0;

  answers = [503];
  await pass();
  expect(await opened()).toBe(1);
  expect(received.map((r) => r.status)).toEqual([503]);
  await pass();
  expect(received.map((r) => r.status)).toEqual([503, 204]);
  expect(received[1]!.headers['webhook-id']).toBe(received[0]!.headers['webhook-id']);
  const note = verified(received[1]!);
  expect(note).toMatchObject({
    type: 'failure_group.opened',
    data: { handler: 'charge-card', runs: 3, shape: 'PermanentError: card API answered 422: currency not supported for invoice <id> (#)' },
  });
  expect(note.data.url).toBe(`https://ops.example.com/admin/events?group=${note.data.id}&handler=charge-card`);
  // A tampered body does not verify (the signature covers it).
  expect(() => verified({ ...received[1]!, body: received[1]!.body.replace('"runs":3', '"runs":4') })).toThrow();
  // The gauges: one open group holding 3 runs.
  expect((await metrics.failureGroups.get()).values).toEqual([expect.objectContaining({ labels: { handler: 'charge-card' }, value: 1 })]);
  expect((await metrics.failureGroupRuns.get()).values).toEqual([expect.objectContaining({ labels: { handler: 'charge-card' }, value: 3 })]);

  // More runs of the same group: no new opening, no new notification.
  await failRuns(['in_a4']);
  await pass();
  await pass();
  expect(received).toHaveLength(2);
  expect(await opened()).toBe(1);

  // Resolved by an operator; a run of it fails again later: opened again, notified again.
  const ops = createOperations({ pool: db.pool, queries: q, queue });
  expect(await ops.resolveFailureGroup(note.data.id, 'operator', 'card API fixed')).toMatchObject({ ok: true });
  await pass();
  expect(received).toHaveLength(2);
  await new Promise((resolve) => setTimeout(resolve, 20));
  await failRuns(['in_a5']);
  await pass();
  expect(await opened()).toBe(2);
  expect(received).toHaveLength(3);
  expect(received[2]!.headers['webhook-id']).not.toBe(received[0]!.headers['webhook-id']);
  expect(verified(received[2]!).data).toMatchObject({ id: note.data.id, runs: 5 });

  // No failing run left: the pass closes the group; the same shape failing later is a new opening.
  await db.pool.query(`DELETE FROM oncehook.events WHERE event_id LIKE 'in_a%'`);
  await pass();
  expect((await db.pool.query<{ closed: boolean }>(`SELECT closed_at IS NOT NULL AS closed FROM oncehook.failure_groups`)).rows).toEqual([{ closed: true }]);
  await failRuns(['in_b1']);
  await pass();
  expect(await opened()).toBe(3);
  expect(received).toHaveLength(4);
  expect(verified(received[3]!).data).toMatchObject({ id: note.data.id, runs: 1 });
});

it('FAILURE_NOTIFY_URL without its secret (or a secret that is not one) stops the worker with a message', () => {
  expect(() => loadWorkerConfig({ FAILURE_NOTIFY_URL: 'https://hooks.example.com/x' })).toThrow(/FAILURE_NOTIFY_URL and FAILURE_NOTIFY_SECRET go together/);
  expect(() => loadWorkerConfig({ FAILURE_NOTIFY_URL: 'https://hooks.example.com/x', FAILURE_NOTIFY_SECRET: 'short' })).toThrow(/FAILURE_NOTIFY_SECRET decodes to 3 bytes/);
  expect(() => loadWorkerConfig({ FAILURE_NOTIFY_URL: 'ftp://hooks.example.com/x', FAILURE_NOTIFY_SECRET: SECRET })).toThrow(/FAILURE_NOTIFY_URL must be an http\(s\) URL/);
  expect(loadWorkerConfig({ FAILURE_NOTIFY_URL: 'https://hooks.example.com/x', FAILURE_NOTIFY_SECRET: SECRET }).FAILURE_NOTIFY_SECRET).toHaveLength(32);
});

it('ten notifications to a receiver that never answers: sent at once, the pass does not wait for them, each try cut by its timeout', async () => {
  const held: import('node:http').ServerResponse[] = [];
  const silent = createServer((req, res) => {
    req.resume();
    held.push(res);
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hooks`;
  try {
    await db.pool.query(`DELETE FROM oncehook.events`);
    await db.pool.query(`DELETE FROM oncehook.failure_groups`);
    const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
    const shaped = defineHandler({ name: 'ten-shapes', source: 'stripe', type: 'invoice.paid' }, async (event) => {
      throw new PermanentError(`ledger refused: ${event.eventId.split('_')[1]}`);
    });
    const e = engine(db.pool, [shaped]);
    for (const word of words) {
      const id = `in_${word}`;
      const rowId = await claimStripe(db.pool, id, 'invoice.paid');
      await e.processJob(dispatchJob(rowId, id));
      await e.processJob({ rowId, source: 'stripe', eventId: id, handler: 'ten-shapes', generation: 0, attempt: 0 });
    }
    const reconciler = createReconciler({
      pool: db.pool,
      queries: q,
      queue,
      log: testLog,
      settings: { intervalMs: 1_000, requeueAfterMs: 60_000, batchSize: 100 },
      failureNotify: { url: silentUrl, hmacKey: destinationHmacKey(SECRET) },
    });
    const attempts = async () => (await db.pool.query<{ n: number }>(`SELECT sum(notify_attempts)::int AS n FROM oncehook.failure_groups WHERE handler = 'ten-shapes'`)).rows[0]!.n;
    await reconciler.runOnce();
    // The pass is over while the ten tries are all in flight at the receiver at the same moment
    // (none has ended: no try recorded yet). A pass that waited for them would end after them.
    await waitFor(() => (held.length === 10 ? true : null), { timeoutMs: NOTIFY_TIMEOUT_MS, what: 'ten notifications in flight at once' });
    expect(await attempts()).toBe(0);
    await reconciler.notifier!.idle();
    const { rows } = await db.pool.query<{ attempts: number; notified: boolean }>(
      `SELECT notify_attempts AS attempts, notified_at IS NOT NULL AS notified FROM oncehook.failure_groups WHERE handler = 'ten-shapes'`,
    );
    expect(rows).toHaveLength(10);
    expect(rows.every((r) => r.attempts === 1 && !r.notified)).toBe(true);
    await reconciler.stop();
  } finally {
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  }
});

it('a FAILURE_NOTIFY_URL at a link-local or metadata address is refused at start, in any form', () => {
  for (const url of ['http://169.254.169.254/x', 'http://[::ffff:a9fe:a9fe]/x', 'http://[64:ff9b::a9fe:a9fe]/x', 'http://100.100.100.200/x']) {
    expect(() => loadWorkerConfig({ FAILURE_NOTIFY_URL: url, FAILURE_NOTIFY_SECRET: SECRET }), url).toThrow(/FAILURE_NOTIFY_URL: \S+ .*a (link-local|cloud metadata) address/);
  }
});
