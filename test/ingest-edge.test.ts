/**
 * The edge: verify, claim, enqueue, answer. Real HTTP into an in-process ingest over real
 * Postgres and Redis. Every rejection must leave no row and no job behind.
 */
import http from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { jobIdFor } from '@oncehook/core';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, q, startIngest, testPrefix, T, TEST_QUEUE_BACKEND } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';

let db: TestDatabase;
let ingest: IngestHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), env: { BODY_LIMIT_BYTES: String(64 * 1024), DUPLICATE_REENQUEUE_AFTER_MS: '0' } });
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
  await ingest.queue.obliterate({ force: true });
});

async function nothingStored() {
  const rows = await db.pool.query(`SELECT count(*)::int AS n FROM ${T.events}`);
  const jobs = await ingest.queue.getJobCounts('wait', 'active', 'delayed', 'completed', 'failed');
  expect(rows.rows[0]).toEqual({ n: 0 });
  expect(Object.values(jobs).reduce((a, b) => a + b, 0)).toBe(0);
}

describe('POST /webhooks/:source', () => {
  it('claims a new signed event: 202, one row in received, one job with the derived id', async () => {
    const res = await deliver(ingest.url, signStripe(paymentSucceeded('evt_new_1')));
    expect(res.status).toBe(202);
    expect(res.json).toMatchObject({ status: 'accepted', eventId: 'evt_new_1' });
    const row = await q.getEventByKey(db.pool, 'stripe', 'evt_new_1');
    expect(row).toMatchObject({ state: 'received', kind: 'stripe', type: 'payment_intent.succeeded', runsPending: 0 });
    expect((row!.payload as { id: string }).id).toBe('evt_new_1');
    expect(row?.signedAt).toBeInstanceOf(Date);
    const job = await ingest.queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_new_1', attempt: 0 }));
    expect(job?.data).toEqual({ rowId: row?.id, source: 'stripe', eventId: 'evt_new_1', kind: 'stripe', type: 'payment_intent.succeeded', attempt: 0 });
  });

  it('answers a redelivery (new timestamp, new signature) with 200 duplicate and no new row', async () => {
    const event = paymentSucceeded('evt_dup_1');
    expect((await deliver(ingest.url, signStripe(event, { timestamp: Math.floor(Date.now() / 1000) - 60 }))).status).toBe(202);
    const again = await deliver(ingest.url, signStripe(event));
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ status: 'duplicate', eventId: 'evt_dup_1' });
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${T.events}`);
    expect(rows[0]).toEqual({ n: 1 });
  });

  it('re-enqueues a duplicate whose row is still received after the grace period (its job was lost), through the relay after the answer', async () => {
    const jobId = jobIdFor({ source: 'stripe', eventId: 'evt_lost_job', attempt: 0 });
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_lost_job')));
    await waitFor(async () => (await ingest.queue.getJob(jobId)) ?? null, { timeoutMs: 5_000, what: 'the first job' });
    await ingest.queue.obliterate({ force: true }); // Redis lost the job
    expect(await ingest.queue.getJob(jobId)).toBeUndefined();
    const again = await deliver(ingest.url, signStripe(paymentSucceeded('evt_lost_job')));
    expect(again.status).toBe(200);
    const job = await waitFor(async () => (await ingest.queue.getJob(jobId)) ?? null, { timeoutMs: 5_000, what: 'the nudged job' });
    expect(job.data).toMatchObject({ source: 'stripe', eventId: 'evt_lost_job', attempt: 0 });
  });

  it('does not re-enqueue a duplicate of an event that is already done', async () => {
    await deliver(ingest.url, signStripe(paymentSucceeded('evt_done')));
    await db.pool.query(`UPDATE ${T.events} SET state = 'done', finished_at = now()`);
    await ingest.queue.obliterate({ force: true });
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_done')))).status).toBe(200);
    // The relay adds in order: once a later new event's job is there, a nudge would be too.
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_after_done')))).status).toBe(202);
    await waitFor(async () => (await ingest.queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_after_done', attempt: 0 }))) ?? null, { timeoutMs: 5_000 });
    expect(await ingest.queue.getJob(jobIdFor({ source: 'stripe', eventId: 'evt_done', attempt: 0 }))).toBeUndefined();
  });

  it('rejects a bad signature with 401: no row, no job', async () => {
    const res = await deliver(ingest.url, signStripe(paymentSucceeded('evt_forged'), { secret: 'whsec_wrong' }));
    expect(res.status).toBe(401);
    expect(res.json).toMatchObject({ error: 'bad_signature' });
    await nothingStored();
  });

  it('rejects a tampered body with 401', async () => {
    const delivery = signStripe(paymentSucceeded('evt_tamper', { amount: 100 }));
    delivery.body = delivery.body.replace('"amount_received":100', '"amount_received":100000');
    expect((await deliver(ingest.url, delivery)).status).toBe(401);
    await nothingStored();
  });

  it('rejects a stale and a future timestamp with distinct 401 reasons', async () => {
    const now = Math.floor(Date.now() / 1000);
    const stale = await deliver(ingest.url, signStripe(paymentSucceeded('evt_stale'), { timestamp: now - 310 }));
    expect(stale).toMatchObject({ status: 401, json: { error: 'timestamp_too_old' } });
    const future = await deliver(ingest.url, signStripe(paymentSucceeded('evt_future'), { timestamp: now + 310 }));
    expect(future).toMatchObject({ status: 401, json: { error: 'timestamp_in_future' } });
    await nothingStored();
  });

  it('rejects a missing signature header with 400 naming the header', async () => {
    const res = await deliver(ingest.url, { body: JSON.stringify(paymentSucceeded('evt_nosig')), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(String(res.json.message)).toMatch(/Stripe-Signature/);
    await nothingStored();
  });

  it('rejects valid-signature malformed JSON with 400', async () => {
    const res = await deliver(ingest.url, signStripe('{"id": "evt_x", '));
    expect(res).toMatchObject({ status: 400, json: { error: 'malformed_payload' } });
    await nothingStored();
  });

  it('rejects a body over BODY_LIMIT_BYTES with 413 before verifying', async () => {
    const huge = signStripe({ ...paymentSucceeded('evt_huge'), pad: 'x'.repeat(70 * 1024) });
    const res = await deliver(ingest.url, huge);
    expect(res.status).toBe(413);
    expect(res.json).toMatchObject({ error: 'payload_too_large' });
    await nothingStored();
  });

  /** POSTs a body in chunks with Transfer-Encoding: chunked (no Content-Length). */
  function postChunked(body: string, headers: Record<string, string>, chunkBytes = 8 * 1024): Promise<{ status: number; json: Record<string, unknown> }> {
    return new Promise((resolve, reject) => {
      const request = http.request(`${ingest.url}/webhooks/stripe`, { method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as Record<string, unknown> }));
      });
      request.on('error', reject);
      for (let i = 0; i < body.length; i += chunkBytes) request.write(body.slice(i, i + chunkBytes));
      request.end();
    });
  }

  it('a chunked body (no Content-Length) is counted as it streams: over BODY_LIMIT_BYTES 413, within it accepted', async () => {
    const huge = signStripe({ ...paymentSucceeded('evt_chunked_huge'), pad: 'x'.repeat(70 * 1024) });
    const over = await postChunked(huge.body, huge.headers);
    expect(over).toMatchObject({ status: 413, json: { error: 'payload_too_large' } });
    await nothingStored();
    const small = signStripe(paymentSucceeded('evt_chunked_small'));
    const accepted = await postChunked(small.body, small.headers, 64);
    expect(accepted).toMatchObject({ status: 202, json: { eventId: 'evt_chunked_small' } });
  });

  it('answers 404 for an unknown provider and 405 for a wrong method', async () => {
    const unknown = await deliver(ingest.url, signStripe(paymentSucceeded('evt_404')), 'paypal');
    expect(unknown.status).toBe(404);
    const get = await fetch(`${ingest.url}/webhooks/stripe`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    await nothingStored();
  });
});

describe('health', () => {
  it('/healthz says the process is up; /readyz checks Postgres and the queue (Redis, or Postgres with QUEUE_BACKEND=postgres)', async () => {
    expect((await fetch(`${ingest.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${ingest.url}/readyz`);
    expect(ready.status).toBe(200);
    const queueCheck = TEST_QUEUE_BACKEND === 'redis' ? { redis: 'ok' } : { queue: 'ok' };
    expect(await ready.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', ...queueCheck } });
  });
});
