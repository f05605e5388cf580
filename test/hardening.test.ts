/**
 * Hardening, second round (issue 24), each finding replayed for real against running
 * processes, each failing without its defence (the mutant each kills is named beside it):
 *
 * F1 a signed payload of numbers jsonb prints in full (4,200 x `1e131071`: 38 KB on the wire,
 *    550 MB per read) is refused at the edge; one stored before the limits kills no process:
 *    its run is failed with a reason, the admin page and the CLI show it bounded.
 * F3 one event delivered 2,000 times keeps at most DELIVERY_LOG_ROWS log rows and counts the rest.
 * F4 a 5,000-deep array is refused at the edge; one stored before renders bounded.
 * F5 an hmac source refuses a signed body that is not a JSON object.
 * F6 a signed delivery pipelined behind an early refusal on one connection is not processed.
 * (F2, the body budget, and F7, liveness under a flood: test/edge-hardening.alone.test.ts.)
 */
import { createHmac } from 'node:crypto';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { killAllServices, paymentSucceeded, REDIS_URL, ROOT, signStripe, spawnService, STRIPE_SECRET, waitFor, nodeArgsFor } from '@oncehook/harness';
import { MAX_PAYLOAD_DEPTH } from '@oncehook/shared';
import { createSource, type WebhookSource } from '@oncehook/providers';
import { DELIVERY_LOG_ROWS } from '@oncehook/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { createMetricsProbe } from './helpers/metrics.js';
import { type IngestHandle, ingestUrl, q, startIngest, T, TEST_QUEUE_BACKEND, testEnv, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let ingest: IngestHandle;
const prefix = testPrefix();
const probe = createMetricsProbe();
const HMAC_SECRET = 'in-house-signing-secret';
const TOKEN = 'hardening-admin-token-0123456789';

function sources(): Map<string, WebhookSource> {
  const stripe = createSource({ name: 'stripe', kind: 'stripe', secrets: [STRIPE_SECRET] }, {});
  const hmac = createSource(
    {
      name: 'inhouse',
      kind: 'hmac',
      secrets: [HMAC_SECRET],
      signatureHeader: 'X-Sig',
      encoding: 'hex',
      timestampHeader: 'X-Timestamp',
      signedHeaders: ['X-Event-Id'],
      id: { header: 'X-Event-Id' },
      type: { value: 'ping' },
    } as Parameters<typeof createSource>[0],
    {},
  );
  return new Map([
    ['stripe', stripe],
    ['inhouse', hmac],
  ]);
}

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: sources(), metrics: probe.metrics, env: { ADMIN_TOKEN: TOKEN } });
});
afterAll(async () => {
  await killAllServices();
  await ingest.queue.obliterate({ force: true });
  await ingest.close();
  await db.drop();
});

const post = (delivery: { body: string; headers: Record<string, string> }, source = 'stripe') =>
  fetch(`${ingest.url}/webhooks/${source}`, { method: 'POST', body: delivery.body, headers: delivery.headers }).then(async (r) => ({
    status: r.status,
    json: (await r.json()) as Record<string, unknown>,
  }));

/** A signed Stripe event whose `data.object` is `object` (raw JSON text). */
function stripeWith(eventId: string, objectJson: string) {
  return signStripe(`{"id":"${eventId}","object":"event","type":"payment_intent.succeeded","created":${Math.floor(Date.now() / 1000)},"data":{"object":${objectJson}}}`);
}

async function rowsOf(eventId: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events} WHERE event_id = $1`, [eventId]);
  return rows[0]?.n ?? -1;
}

describe('F1/F4 payload limits at the edge', () => {
  // Mutant killed: payload-number-limit-off.
  it('4,200 copies of 1e131071 (38 KB, 550 MB printed): 400 payload_limit naming the limit, nothing stored', async () => {
    const answer = await post(stripeWith('evt_poison_numbers', `{"values":[${Array(4200).fill('1e131071').join(',')}]}`));
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ error: 'payload_limit', message: expect.stringMatching(/1e131071.*131,072 characters written out in full; numbers are limited to 64/) });
    expect(await rowsOf('evt_poison_numbers')).toBe(0);
  });

  it('a number too small for a JavaScript double (1e-400), or 1e300, is refused the same way', async () => {
    for (const [id, value] of [
      ['evt_tiny', '1e-400'],
      ['evt_e300', '-2.5e300'],
    ] as const) {
      const answer = await post(stripeWith(id, `{"v":${value}}`));
      expect(answer, value).toMatchObject({ status: 400, json: { error: 'payload_limit' } });
      expect(await rowsOf(id)).toBe(0);
    }
  });

  // Mutant killed: payload-depth-limit-off.
  it(`a 5,000-deep array (10 KB) is refused; ${MAX_PAYLOAD_DEPTH} levels are accepted`, async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    const answer = await post(stripeWith('evt_deep', deep(5000)));
    expect(answer).toMatchObject({ status: 400, json: { error: 'payload_limit', message: expect.stringMatching(/deeper than 128 levels/) } });
    expect(await rowsOf('evt_deep')).toBe(0);
    // The payload's own object and data add 2 levels: 126 more reach the limit exactly.
    expect((await post(stripeWith('evt_deep_ok', deep(MAX_PAYLOAD_DEPTH - 2)))).status).toBe(202);
  });

  it('ordinary numbers pass: amounts, decimals, negative, exponents, a 20-digit id', async () => {
    const answer = await post(stripeWith('evt_numbers_ok', '{"amount":2000,"rate":0.0725,"delta":-15.5,"small":1.5e-7,"big":6.02e23,"id":12345678901234567890,"zero":0}'));
    expect(answer.status).toBe(202);
  });

  // Mutant killed: hmac-accepts-non-objects.
  it('F5: an hmac source refuses a signed body that is not a JSON object ([1,2], null, 42)', async () => {
    for (const [i, body] of ['[1,2]', 'null', '42'].entries()) {
      const timestamp = String(Math.floor(Date.now() / 1000));
      const id = `hmac-non-object-${i}`;
      const sig = createHmac('sha256', HMAC_SECRET).update(`${timestamp}.${id}.`).update(body).digest('hex');
      const answer = await post({ body, headers: { 'content-type': 'application/json', 'x-sig': sig, 'x-timestamp': timestamp, 'x-event-id': id } }, 'inhouse');
      expect(answer, body).toMatchObject({ status: 400, json: { error: 'malformed_payload', message: expect.stringMatching(/must be a JSON object/) } });
      expect(await rowsOf(id)).toBe(0);
    }
  });
});

/** As an older version stored it: no payload_bytes, the limits never checked. */
async function storeAsBefore(eventId: string, payloadJson: string): Promise<number> {
  const { rows } = await db.pool.query<{ id: number }>(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, meta) VALUES ('stripe', 'stripe', $1, 'payment_intent.succeeded', $2::jsonb, '{}') RETURNING id`,
    [eventId, payloadJson],
  );
  return rows[0]!.id;
}

function cli(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgsFor('packages/oncehook/src/cli/entry.ts'), ...args], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db.url, REDIS_URL, QUEUE_BACKEND: TEST_QUEUE_BACKEND, QUEUE_PREFIX: prefix },
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('F1/F4 payloads stored before the limits', () => {
  // Mutant killed: unreadable-payload-returned (the worker process dies on the read).
  it('4,200 x 1e131071 stored by an older version: its run is failed with a reason, the worker lives on; admin page, API and CLI answer', async () => {
    const rowId = await storeAsBefore(
      'evt_stored_poison',
      `{"id":"evt_stored_poison","type":"payment_intent.succeeded","data":{"object":{"v":[${Array(4200).fill('1e131071').join(',')}]}}}`,
    );
    const env = testEnv({ databaseUrl: db.url, prefix, extra: { REQUEUE_AFTER_MS: '200', RECONCILE_INTERVAL_MS: '100' } });
    const worker = spawnService('worker', env);
    await worker.waitFor(/worker ready/);
    const runs = await waitFor(
      async () => {
        const found = await q.getRuns(db.pool, rowId);
        return found[0]?.state === 'failed' ? found : null;
      },
      { timeoutMs: 30_000, what: 'the poisoned run failed' },
    );
    expect(runs[0]?.lastError).toMatch(/the stored payload cannot be read safely/);
    expect(runs[0]?.attempts).toBe(1);
    // Alive and well: it answers its health check, and it is the same process.
    const port = /worker metrics on (\d+)/.exec(await worker.waitFor(/worker metrics on \d+/))?.[1];
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(worker.proc.exitCode).toBeNull();

    const auth = { authorization: `Bearer ${TOKEN}` };
    const page = await fetch(`${ingest.url}/admin/events/${rowId}`, { headers: auth });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/not shown: stored before the payload limits/);
    const api = await fetch(`${ingest.url}/admin/api/events/${rowId}`, { headers: auth });
    expect(api.status).toBe(200);
    expect(await api.json()).toMatchObject({ event: { payload: null, payloadUnreadable: true }, payloadView: { truncated: true } });
    const show = await cli(['show', String(rowId), '--json']);
    expect(show.code, show.output).toBe(0);
    expect(show.output).toMatch(/"payloadUnreadable": true/);
    await worker.stop();
  });

  it('10 x 2,000-deep arrays stored by an older version: the admin page and API answer, bounded; the CLI shows it', async () => {
    const rowId = await storeAsBefore(
      'evt_stored_deep',
      `{"id":"evt_stored_deep","data":[${Array(10)
        .fill(`${'['.repeat(2000)}${']'.repeat(2000)}`)
        .join(',')}]}`,
    );
    const auth = { authorization: `Bearer ${TOKEN}` };
    const page = await fetch(`${ingest.url}/admin/events/${rowId}`, { headers: auth });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html.length).toBeLessThan(1024 * 1024);
    expect(html).toMatch(/cut: payloads are shown up to/);
    const api = await fetch(`${ingest.url}/admin/api/events/${rowId}`, { headers: auth });
    expect(api.status).toBe(200);
    expect(await api.json()).toMatchObject({ event: { payload: null }, payloadView: { truncated: true } });
    const show = await cli(['show', String(rowId)]);
    expect(show.code, show.output.slice(-500)).toBe(0);
    expect(show.output.length).toBeLessThan(1024 * 1024);
  });
});

describe('F3 the delivery log of one event delivered 2,000 times', () => {
  // Mutant killed: delivery-log-unbounded.
  it(`keeps ${DELIVERY_LOG_ROWS} rows, counts 2,000 deliveries, and the duplicate metric counts every one`, async () => {
    const delivery = signStripe(paymentSucceeded('evt_storm'));
    const before = await probe.value('webhook_events_total', { provider: 'stripe', result: 'duplicate' });
    for (let sent = 0; sent < 2000; sent += 100) {
      const answers = await Promise.all(Array.from({ length: 100 }, () => post(delivery)));
      expect(answers.every((a) => a.status === 200 || a.status === 202)).toBe(true);
    }
    const event = await q.getEventByKey(db.pool, 'stripe', 'evt_storm');
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.deliveries} WHERE event_row_id = $1`, [event!.id]);
    expect(rows[0]?.n).toBe(DELIVERY_LOG_ROWS);
    const detail = await (await fetch(`${ingest.url}/admin/api/events/${event!.id}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(detail).toMatchObject({ deliveryCount: 2000 });
    expect((detail as { deliveries: unknown[] }).deliveries).toHaveLength(DELIVERY_LOG_ROWS);
    // How each was recognised: the first created the event, the others by its id (issue 64: the
    // old `sameBody: false` of an identical redelivery read as "another body").
    const matched = (detail as { deliveries: { matchedBy: string | null }[] }).deliveries.map((d) => d.matchedBy);
    expect(matched.filter((m) => m === null)).toHaveLength(1);
    expect(matched.filter((m) => m !== null).every((m) => m === 'id')).toBe(true);
    expect((await probe.value('webhook_events_total', { provider: 'stripe', result: 'duplicate' })) - before).toBe(1999);
  });
});

describe('F6 a delivery pipelined behind an early refusal', () => {
  // Mutant killed: pipelined-after-refusal-processed.
  it('a POST to an unknown source, then a signed POST in the same write: the first refused, the second not processed', async () => {
    const signed = signStripe(paymentSucceeded('evt_pipelined'));
    const { port } = new URL(ingest.url);
    const stripeAnswers = async () => {
      const { values } = await probe.metrics.eventsTotal.get();
      return values.filter((v) => v.labels.provider === 'stripe').reduce((sum, v) => sum + v.value, 0);
    };
    const answersBefore = await stripeAnswers();
    const request = (path: string, body: string, headers: Record<string, string>) =>
      [`POST ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Length: ${Buffer.byteLength(body)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', body].join(
        '\r\n',
      );
    const wire = request('/webhooks/nope', '{"x":1}', { 'content-type': 'application/json' }) + request('/webhooks/stripe', signed.body, signed.headers);
    const received = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect({ host: '127.0.0.1', port: Number(port) }, () => socket.write(wire));
      socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
      socket.on('close', () => resolve(text));
      socket.on('error', () => resolve(text));
    });
    expect(received).toMatch(/^HTTP\/1\.1 404/);
    // The second request has been handled once ingest counted its answer (its outcome, stored
    // or not); then the signed event must not be stored: nobody was told it was, and the
    // sender's retry is then a first delivery, processed once.
    await waitFor(async () => (await stripeAnswers()) > answersBefore, { timeoutMs: 10_000, intervalMs: 20, what: 'the pipelined request handled' });
    expect(await rowsOf('evt_pipelined')).toBe(0);
    expect((await post(signed)).status).toBe(202);
  });
});

describe('an ingest process, for the record', () => {
  it('a poison delivery to a spawned ingest: 400, and the process keeps answering', async () => {
    const child = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: { LOG_LEVEL: 'info' } }));
    const url = await ingestUrl(child);
    const body = stripeWith('evt_poison_process', `{"v":[${Array(500).fill('1e131071').join(',')}]}`);
    const answer = await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: body.body, headers: body.headers });
    expect(answer.status).toBe(400);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await child.stop();
  });
});
