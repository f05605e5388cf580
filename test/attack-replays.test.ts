/**
 * Attacks with captured deliveries (issue 10, findings 2 and 3): a sender's id or type taken
 * from a header the signature does not cover. Real ingest, a real worker running the example
 * shop against the sandbox APIs, real Postgres and Redis; the sandbox's counters are the truth
 * about charges.
 *
 * - Shopify and GitHub: a captured body replayed under new ids is a duplicate (body dedupe),
 *   concurrently too; a Shopify body under another topic is a duplicate; and where body dedupe
 *   is narrowed (per-topic), the shop's order-keyed effects still charge once.
 * - GitHub: a body under another event name is refused.
 * - Generic HMAC: an id from an unsigned header is refused at start, naming the options; with
 *   the header signed, the pre-consumption replay fails its signature and the real event lands.
 */
import { createHmac } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSource } from '@oncehook/providers';
import { allSources, killAllServices, PROVIDER_CASES, SECRETS, send, spawnService, startSandbox, waitFor, type SandboxHandle, type Delivery } from '@oncehook/harness';
import type { OncehookWorker } from 'oncehook';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { shopifyOrder } from './helpers/orders.js';
import { type IngestHandle, q, startIngest, startWorker, stateCounts, T, testEnv, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: OncehookWorker;
let prefix: string;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources() });
  worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
});
afterAll(async () => {
  await worker.close();
  await ingest.close();
  await sandbox.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events}, ledger_entries, ledger_accounts, example_orders, example_customers CASCADE`);
  sandbox.sandbox.reset();
});
afterEach(killAllServices);

/** The same signed delivery with some headers changed (what an attacker can do to a capture). */
function withHeaders(delivery: Delivery, headers: Record<string, string>): Delivery {
  return { body: delivery.body, headers: { ...delivery.headers, ...headers } };
}

async function settled(expected: number): Promise<void> {
  await waitFor(
    async () => {
      const counts = await stateCounts(db.pool);
      return (counts.done ?? 0) + (counts.failed ?? 0) === expected && !counts.received && !counts.processing ? counts : null;
    },
    { timeoutMs: 30_000, what: `${expected} events finished` },
  );
}

async function orderRows(): Promise<{ id: string; paid: number; payments: number }[]> {
  const { rows } = await db.pool.query<{ id: string; paid: number; payments: number }>('SELECT id, paid_cents::int AS paid, payments FROM example_orders ORDER BY id');
  return rows;
}

async function ledgerEntries(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger_entries');
  return rows[0]?.n ?? -1;
}

describe('Shopify', () => {
  it('a captured order replayed under three new webhook ids: each a duplicate, one charge, one credit, paid once', async () => {
    const original = await shopifyOrder(1, 4200);
    expect((await send(ingest.url, 'shopify', original)).status).toBe(202);
    const replays = await Promise.all(['forged-a', 'forged-b', 'forged-c'].map((id) => send(ingest.url, 'shopify', withHeaders(original, { 'x-shopify-webhook-id': id }))));
    for (const replay of replays) expect(replay).toMatchObject({ status: 200, json: { status: 'duplicate' } });

    await settled(1);
    expect(sandbox.stats().payment.applied).toBe(1);
    expect(await ledgerEntries()).toBe(1);
    expect(await orderRows()).toEqual([{ id: 'shopify-5000001', paid: 4200, payments: 1 }]);
  });

  it('the same body under several new ids at the same moment: one 202, the rest duplicates, one row', async () => {
    const original = await shopifyOrder(2);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => send(ingest.url, 'shopify', withHeaders(original, { 'x-shopify-webhook-id': `concurrent-${i}` }))));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200 && a.json.status === 'duplicate')).toHaveLength(7);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
    expect(rows[0]?.n).toBe(1);
    await settled(1);
    expect(sandbox.stats().payment.applied).toBe(1);
  });

  it('a body delivered for orders/updated, replayed as orders/create under a new id: a duplicate, no charge', async () => {
    const updated = withHeaders(await shopifyOrder(3), { 'x-shopify-topic': 'orders/updated', 'x-shopify-webhook-id': 'wh-updated-3' });
    expect((await send(ingest.url, 'shopify', updated)).status).toBe(202); // no handler: done, nothing charged
    const forged = withHeaders(updated, { 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': 'forged-create-3' });
    expect(await send(ingest.url, 'shopify', forged)).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    await settled(1);
    expect((await q.getEventByKey(db.pool, 'shopify', 'wh-updated-3'))?.type).toBe('orders/updated');
    expect(sandbox.stats().payment.applied).toBe(0);
    expect(await orderRows()).toEqual([]);
  });

  it('with per-topic body dedupe an orders/updated body forged as orders/create runs the handler, and the order-keyed effects still happen once', async () => {
    const sources = new Map([['shopify', createSource({ name: 'shopify', kind: 'shopify', secrets: [SECRETS.shopify], bodyDedupe: 'per-topic' }, {})]]);
    const perTopic = await startIngest({ databaseUrl: db.url, prefix, sources });
    const shopify = PROVIDER_CASES.find((c) => c.source === 'shopify')!;
    try {
      const created = await shopifyOrder(4, 1999);
      expect((await send(perTopic.url, 'shopify', created)).status).toBe(202);
      await settled(1);
      // Shopify later sends orders/updated for the order: another body (a note was added).
      const updatedBody = JSON.stringify({ ...JSON.parse(created.body.toString()), note: 'gift wrap' });
      const updated = withHeaders(await shopify.sign(updatedBody, { id: 'wh-updated-4' }), { 'x-shopify-topic': 'orders/updated' });
      expect((await send(perTopic.url, 'shopify', updated)).status).toBe(202);
      // The attacker resends that capture as orders/create under a new id: per-topic makes it new.
      const forged = withHeaders(updated, { 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': 'forged-create-4' });
      expect((await send(perTopic.url, 'shopify', forged)).status).toBe(202);
      await settled(3);

      // Two orders/create runs for one order. The charge, the receipt and the shipment are keyed
      // on the order, so each API applied its effect once; the second run found the charge
      // recorded on the order and credited nothing.
      const runs = await db.pool.query<{ handler: string; state: string }>(`SELECT handler, state FROM ${T.runs} ORDER BY id`);
      expect(runs.rows).toEqual([
        { handler: 'shop.shopify-orders', state: 'done' },
        { handler: 'shop.shopify-orders', state: 'done' },
      ]);
      const stats = sandbox.stats();
      expect({ payment: stats.payment.applied, email: stats.email.applied, fulfilment: stats.fulfilment.applied }).toEqual({ payment: 1, email: 1, fulfilment: 1 });
      expect(await ledgerEntries()).toBe(1);
      expect(await orderRows()).toEqual([{ id: 'shopify-5000004', paid: 1999, payments: 1 }]);
    } finally {
      await perTopic.close();
    }
  });
});

describe('GitHub', () => {
  const github = PROVIDER_CASES.find((c) => c.source === 'github')!;

  it('a captured delivery replayed under new delivery ids and another hook id: duplicates, one row', async () => {
    const original = await github.sign(github.body('x'), { id: 'delivery-original' });
    expect((await send(ingest.url, 'github', original)).status).toBe(202);
    const forgeries: Record<string, string>[] = [{ 'x-github-delivery': 'forged-1' }, { 'x-github-delivery': 'forged-2', 'x-github-hook-id': '1' }];
    for (const headers of forgeries) {
      expect(await send(ingest.url, 'github', withHeaders(original, headers))).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    }
    const { rows } = await db.pool.query<{ n: number; id: number }>(`SELECT count(*) OVER ()::int AS n, id FROM ${T.events}`);
    expect(rows[0]?.n).toBe(1);
    // The event's deliveries say how each forgery was recognised: by its body, under another id.
    const detail = (await q.showEvent(db.pool, rows[0]!.id))!;
    expect(detail.deliveries.map((d) => d.matchedBy)).toEqual([null, 'body', 'body']);
  });

  it('a body sent under another event name is refused (400), nothing stored', async () => {
    const issues = await github.sign(github.body('x'), { id: 'delivery-push' });
    const asPush = await send(ingest.url, 'github', withHeaders(issues, { 'x-github-event': 'push' }));
    expect(asPush).toMatchObject({ status: 400, json: { error: 'malformed_payload' } });
    expect(String(asPush.json.message)).toMatch(/X-GitHub-Event is "push" but the body has no "commits"/);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
    expect(rows[0]?.n).toBe(0);
  });
});

describe('generic HMAC with the id in a header', () => {
  const SECRET = 'in-house-signing-secret';
  const base = {
    name: 'inhouse',
    kind: 'hmac',
    secrets: [SECRET],
    signatureHeader: 'X-Sig',
    encoding: 'hex',
    timestampHeader: 'X-Timestamp',
    id: { header: 'X-Event-Id' },
    type: { field: 'type' },
  };

  function sign(body: string, id: string, signedId: boolean): Delivery {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const mac = createHmac('sha256', SECRET).update(`${timestamp}.`);
    if (signedId) mac.update(`${id}.`);
    return { body, headers: { 'content-type': 'application/json', 'x-sig': mac.update(body).digest('hex'), 'x-timestamp': timestamp, 'x-event-id': id } };
  }

  it('is refused at start when the signature does not cover the header, with a message naming the options', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-sources-'));
    const file = path.join(dir, 'sources.json');
    await writeFile(file, JSON.stringify({ sources: [base] }));
    const ingestProcess = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_SOURCES_FILE: file } }));
    const { code } = await ingestProcess.exited;
    expect(code).toBe(1);
    const output = ingestProcess.lines.join('\n');
    expect(output).toMatch(/the event id comes from header X-Event-Id, which the signature does not cover/);
    expect(output).toMatch(/signedHeaders/);
    expect(output).toMatch(/bodyDedupe: true/);
  });

  it('with the header signed: a capture replayed under the next real id fails its signature, and the real event lands', async () => {
    const sources = new Map([['inhouse', createSource({ ...base, signedHeaders: ['X-Event-Id'] } as Parameters<typeof createSource>[0], {})]]);
    const local = await startIngest({ databaseUrl: db.url, prefix, sources });
    try {
      const captured = sign('{"type":"invoice.paid","n":1}', 'evt-41', true);
      expect((await send(local.url, 'inhouse', captured)).status).toBe(202);
      // The attacker resends the capture under the id the next real event will carry.
      expect(await send(local.url, 'inhouse', withHeaders(captured, { 'x-event-id': 'evt-42' }))).toMatchObject({ status: 401, json: { error: 'bad_signature' } });
      expect((await send(local.url, 'inhouse', sign('{"type":"invoice.paid","n":2}', 'evt-42', true))).status).toBe(202);
      const row = await q.getEventByKey(db.pool, 'inhouse', 'evt-42');
      expect(row?.payload).toEqual({ type: 'invoice.paid', n: 2 });
    } finally {
      await local.close();
    }
  });

  it('with bodyDedupe instead: the capture under another id is a duplicate, and a real event under that id still lands', async () => {
    const sources = new Map([['inhouse', createSource({ ...base, bodyDedupe: true } as Parameters<typeof createSource>[0], {})]]);
    const local = await startIngest({ databaseUrl: db.url, prefix, sources });
    try {
      const captured = sign('{"type":"invoice.paid","n":1}', 'evt-51', false);
      expect((await send(local.url, 'inhouse', captured)).status).toBe(202);
      expect(await send(local.url, 'inhouse', withHeaders(captured, { 'x-event-id': 'evt-52' }))).toMatchObject({ status: 200, json: { status: 'duplicate' } });
      expect((await send(local.url, 'inhouse', sign('{"type":"invoice.paid","n":2}', 'evt-52', false))).status).toBe(202);
      expect((await q.getEventByKey(db.pool, 'inhouse', 'evt-52'))?.payload).toEqual({ type: 'invoice.paid', n: 2 });
    } finally {
      await local.close();
    }
  });
});
