/**
 * @oncehook/testkit, tested:
 * - signedDelivery signs as each provider does: byte-identical to the official SDKs where they
 *   sign (Stripe, GitHub, Shopify, Standard Webhooks, Svix), and accepted by ingest for every kind;
 * - checkHandler passes the handler docs/handlers.md shows and the example shop's handlers, and
 *   catches handlers that are wrong in the ways that double effects: a key from Date.now(), a
 *   random key, a request without the key, a handler that swallows a crash.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { allSources, ROOT, SECRETS, send, startSandbox, type SandboxHandle } from '@oncehook/harness';
import { createOutboundClient, defineHandler, type Handler } from '@oncehook/sdk';
import { migrate } from '@oncehook/core';
import type { Pool } from '@oncehook/shared';
import { type CheckReport, checkHandler, signedDelivery, startStandInApi, type DeliveryKind } from '@oncehook/testkit';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { docCodeBlock } from './helpers/docs.js';
import { exampleHandlers, startIngest, T, testPrefix, type IngestHandle } from './helpers/stack.js';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
const moduleDir = path.join(ROOT, `my-handlers-check-${process.pid}`);

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources: allSources() });
});
afterAll(async () => {
  await rm(moduleDir, { recursive: true, force: true });
  await ingest.close();
  await sandbox.close();
  await db.drop();
});

describe('signedDelivery', () => {
  const timestamp = Math.floor(Date.now() / 1000);

  it('signs byte for byte as the official SDKs do', async () => {
    const stripeBody = JSON.stringify({ id: 'evt_sig', object: 'event', type: 'charge.refunded', created: timestamp, data: { object: {} } });
    const stripe = signedDelivery('stripe', stripeBody, SECRETS.stripe, { timestamp });
    expect(stripe.headers['stripe-signature']).toBe(new Stripe('sk_test_x').webhooks.generateTestHeaderString({ payload: stripeBody, secret: SECRETS.stripe, timestamp }));

    const github = signedDelivery('github', { action: 'opened' }, SECRETS.github, { type: 'issues.opened', id: 'd-1' });
    expect(github.headers['x-hub-signature-256']).toBe(await githubSign(SECRETS.github, github.body));
    expect(github.headers['x-github-event']).toBe('issues');
    expect(github.eventId).toBe('1:d-1');

    const shopify = signedDelivery('shopify', { id: 1 }, SECRETS.shopify, { type: 'orders/create' });
    expect(shopify.headers['x-shopify-hmac-sha256']).toBe(await shopifyHmac(shopify.body, SECRETS.shopify));

    const standard = signedDelivery('standard-webhooks', { type: 'invoice.paid', data: {} }, SECRETS.standard, { id: 'msg_1', timestamp });
    expect(standard.headers['webhook-signature']).toBe(new StandardWebhook(SECRETS.standard).sign('msg_1', new Date(timestamp * 1000), standard.body));

    const svix = signedDelivery('svix', { type: 'user.created' }, SECRETS.svix, { id: 'msg_2', timestamp });
    expect(svix.headers['svix-signature']).toBe(new SvixWebhook(SECRETS.svix).sign('msg_2', new Date(timestamp * 1000), svix.body));
  });

  it("an id given replaces the payload's own where the provider puts it in the body; a byte-for-byte payload with another id is refused", () => {
    const withId = { id: 'evt_fixture', type: 'charge.refunded', data: { object: {} } };
    expect(signedDelivery('stripe', withId, SECRETS.stripe, { id: 'evt_chosen' })).toMatchObject({ eventId: 'evt_chosen' });
    expect(JSON.parse(signedDelivery('stripe', withId, SECRETS.stripe, { id: 'evt_chosen' }).body).id).toBe('evt_chosen');
    expect(signedDelivery('stripe', withId, SECRETS.stripe).eventId).toBe('evt_fixture');
    expect(signedDelivery('paddle', { event_id: 'evt_p', event_type: 'x' }, SECRETS.paddle, { id: 'evt_q' }).eventId).toBe('evt_q');
    expect(signedDelivery('slack', { type: 'event_callback', event_id: 'Ev1', event: {} }, SECRETS.slack, { id: 'Ev2' }).eventId).toBe('Ev2');
    // The same id on a string payload is fine (a redelivery of those bytes); another one cannot be put in.
    expect(signedDelivery('stripe', JSON.stringify(withId), SECRETS.stripe, { id: 'evt_fixture' }).eventId).toBe('evt_fixture');
    expect(() => signedDelivery('stripe', JSON.stringify(withId), SECRETS.stripe, { id: 'evt_other' })).toThrow(/sent byte for byte and its id is "evt_fixture", not "evt_other"/);
  });

  it.each<[DeliveryKind, string, unknown, string]>([
    ['stripe', 'stripe', { type: 'charge.refunded', data: { object: {} } }, SECRETS.stripe],
    ['github', 'github', { action: 'opened', issue: { number: 1 } }, SECRETS.github],
    ['shopify', 'shopify', { id: 2 }, SECRETS.shopify],
    ['standard-webhooks', 'standard-webhooks', { type: 'invoice.paid' }, SECRETS.standard],
    ['svix', 'svix', { type: 'user.created' }, SECRETS.svix],
    ['slack', 'slack', { type: 'app_mention', text: 'hi' }, SECRETS.slack],
    ['paddle', 'paddle', { event_type: 'subscription.renewed', data: {} }, SECRETS.paddle],
  ])('%s deliveries are accepted by ingest, then answered duplicate when sent again', async (kind, source, payload, secret) => {
    const delivery = signedDelivery(kind, payload, secret, { type: kind === 'github' ? 'issues.opened' : undefined });
    expect((await send(ingest.url, source, delivery)).status).toBe(202);
    // A redelivery: same id, new signature.
    const again = signedDelivery(kind, delivery.body, secret, {
      id: kind === 'github' ? delivery.eventId.split(':')[1] : delivery.eventId,
      type: kind === 'github' ? 'issues.opened' : undefined,
    });
    expect(
      await send(ingest.url, source, kind === 'github' ? { ...again, headers: { ...again.headers, 'x-github-delivery': delivery.headers['x-github-delivery']! } } : again),
    ).toMatchObject({
      status: 200,
      json: { status: 'duplicate', eventId: delivery.eventId },
    });
  });

  it('generic HMAC sources sign as configured', async () => {
    const delivery = signedDelivery('hmac', { event: { id: 'int_1', kind: 'order.paid' } }, SECRETS.hmac, {
      hmac: { signatureHeader: 'X-Internal-Signature', encoding: 'hex', signaturePrefix: 'sha256=', timestampHeader: 'X-Internal-Timestamp' },
    });
    expect((await send(ingest.url, 'internal', delivery)).status).toBe(202);
  });
});

describe('checkHandler', () => {
  /** Every report of this file's checks: their databases must be gone at the end. */
  const reports: CheckReport[] = [];
  const check = async (...args: Parameters<typeof checkHandler>) => {
    const report = await checkHandler(...args);
    reports.push(report);
    return report;
  };
  const shop = () => (db: Pool) => migrate(db, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  const shopState = async (db: { query: (sql: string) => Promise<{ rows: unknown[] }> }) => ({
    ledger: (await db.query('SELECT account_id, amount_cents::int AS amount FROM ledger_entries ORDER BY id')).rows,
    orders: (await db.query('SELECT id, paid_cents::int AS paid, status, cardinality(receipt_ids) AS receipts, shipment_id IS NOT NULL AS shipped FROM example_orders ORDER BY id'))
      .rows,
  });
  const handler = (name: string) => exampleHandlers(sandbox.url).find((h) => h.name === name)!;

  it('passes the handler docs/handlers.md shows (its crash at every step boundary, and duplicates)', async () => {
    await mkdir(moduleDir, { recursive: true });
    await writeFile(path.join(moduleDir, 'refunds.ts'), await docCodeBlock('docs/handlers.md', 'my-handlers/refunds.ts'));
    process.env.REFUNDS_EMAIL_API_URL = `${sandbox.url}/email`;
    const refunds = (await import(path.join(moduleDir, 'refunds.ts'))).default as Handler;
    const charge = { id: 'ch_1', object: 'charge', amount_refunded: 1500, currency: 'usd', customer: 'cus_1', billing_details: { email: 'ada@example.com' } };
    const report = await check(
      refunds,
      { type: 'charge.refunded', payload: { id: 'evt_1', type: 'charge.refunded', data: { object: charge } } },
      {
        setup: (db) => db.query('CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)'),
        state: async (db) => (await db.query('SELECT id, balance_cents::int AS balance FROM accounts ORDER BY id')).rows,
      },
    );
    expect(report.problems).toEqual([]);
    expect(report.boundaries).toEqual(['before "debit-account" commits', 'after "email-customer" returned, before its record']);
    expect(report.scenarios.map((s) => s.name)).toEqual([
      'clean run',
      'crash before "debit-account" commits',
      'crash after "email-customer" returned, before its record',
      '5 concurrent duplicate deliveries',
    ]);
    // The crash after the email call made the resumed attempt call again, with the same key.
    const afterEmail = report.scenarios[2]!;
    expect(afterEmail.requests.map((r) => [r.attempt, r.sent === r.given])).toEqual([
      [1, true],
      [2, true],
    ]);
  });

  it("passes the example shop's handlers", async () => {
    const order = {
      id: 'evt_check_order',
      type: 'payment_intent.succeeded',
      data: {
        object: {
          id: 'pi_1',
          amount: 900,
          amount_received: 900,
          currency: 'usd',
          customer: 'cus_o',
          receipt_email: 'o@example.com',
          metadata: { order_id: 'order-check', order_total: '900' },
        },
      },
    };
    const checks = [
      check(handler('shop.payments'), { type: 'payment_intent.succeeded', payload: order }, { setup: shop(), state: shopState }),
      check(
        handler('shop.shopify-orders'),
        { type: 'orders/create', payload: { id: 42, email: 'b@example.com', currency: 'EUR', total_price: '12.50', line_items: [{ sku: 'a', quantity: 1 }] } },
        { setup: shop(), state: shopState },
      ),
      check(
        handler('shop.renewals'),
        { type: 'subscription.renewed', payload: { type: 'subscription.renewed', data: { subscription_id: 'sub_c', customer_id: 'cus_c', amount: 700, currency: 'usd' } } },
        { setup: shop(), state: shopState },
      ),
      check(
        handler('shop.customer-profiles'),
        { type: 'customer.updated', payload: { data: { object: { id: 'cus_p', email: 'p@example.com', name: 'P' } } } },
        {
          setup: shop(),
          state: async (db) => (await db.query('SELECT id, email FROM example_customers')).rows,
        },
      ),
    ];
    const reports = [];
    for (const check of checks) reports.push(await check);
    for (const report of reports) expect(report.problems).toEqual([]);
    expect(reports[0]!.boundaries).toHaveLength(4); // record-payment, send-receipt, request-shipment, record-fulfilment
    // Four whole checks (each a scratch database per crash point): about four times the one
    // above, which took 23 s in a run beside two CPU hogs; at the default 60 s this test timed
    // out there while doing nothing wrong. Its budget matches its work.
  }, 240_000);

  const payment = () => createOutboundClient({ name: 'payment', baseUrl: `${sandbox.url}/payment`, maxTries: 1 });
  const event = { type: 'test.charge', payload: { amount: 100 } };
  const anything = z.unknown();

  it('catches a handler that derives its outbound key from Date.now()', async () => {
    const client = payment();
    const wrong = defineHandler({ name: 'wrong-clock', source: 'stripe', type: 'test.charge', payload: anything }, async (_event, ctx) => {
      await ctx.step('charge', async ({ signal }) => {
        const res = await client.request<{ id: string }>({
          method: 'POST',
          path: '/v1/charges',
          body: { customer: 'c', amount: 100, currency: 'usd' },
          idempotencyKey: `charge-${Date.now()}-${Math.random()}`,
          signal,
        });
        return { id: res.body.id };
      });
    });
    const report = await check(wrong, event);
    expect(report.ok).toBe(false);
    expect(report.problems).toContainEqual(
      expect.stringMatching(/^clean run: external step "charge" sent Idempotency-Key "charge-\d+-[\d.]+", not the key it was given \("oncehook-/),
    );
    expect(report.problems).toContainEqual(
      expect.stringMatching(/^crash after "charge" returned, before its record: external step "charge" was called again with a DIFFERENT key: "charge-.*" then "charge-/),
    );
  });

  it('catches a request that carries no key at all (at-least-once), unless the step is declared keyless', async () => {
    const keyless = defineHandler({ name: 'keyless', source: 'stripe', type: 'test.charge', payload: anything }, async (_event, ctx) => {
      await ctx.step('notify', async ({ signal }) => {
        await fetch(`${sandbox.url}/email/emails`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ to: 'x@example.com', subject: 's' }),
          signal,
        });
        return null;
      });
    });
    const report = await check(keyless, event, { duplicates: 0 });
    expect(report.problems).toContainEqual(expect.stringMatching(/external step "notify" sent POST .*\/email\/emails without an idempotency key/));
    expect((await check(keyless, event, { duplicates: 0, keylessSteps: ['notify'] })).problems).toEqual([]);
  });

  it('catches a handler that swallows a crash in a step and goes on', async () => {
    const swallowing = defineHandler({ name: 'swallower', source: 'stripe', type: 'test.charge', payload: anything }, async (_event, ctx) => {
      await ctx.transaction('first', async () => 1).catch(() => null);
      await ctx.transaction('second', async () => 2);
    });
    const report = await check(swallowing, event, { duplicates: 0 });
    expect(report.problems).toContainEqual(
      expect.stringMatching(/crash before "first" commits: the handler caught the simulated crash and went on: step "second" committed after it/),
    );
  });

  it('reports a handler that does not end done', async () => {
    const broken = defineHandler({ name: 'broken', source: 'stripe', type: 'test.charge', payload: z.object({ amount: z.string() }) }, async () => {});
    const report = await check(broken, event);
    expect(report.problems).toEqual([expect.stringMatching(/^clean run: the event ended failed, not done: broken: failed \(PermanentError: the payload does not match/)]);
    expect(report.scenarios).toHaveLength(1);
  });

  it('the stand-in API: a repeated key is answered as the first time, failures on demand; with it a check needs no server of its own', async () => {
    const api = await startStandInApi({ answer: (request) => ({ id: `ntf_${request.n}` }) });
    try {
      const post = (key: string | null, body = '{"charge":"ch_1"}') =>
        fetch(`${api.url}/notifications`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) } });
      const first = await post('k1');
      const again = await post('k1');
      expect(await again.json()).toEqual(await first.json());
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await post('k1', '{"charge":"ch_2"}')).status).toBe(400); // one key, another request
      await post(null);
      await post(null); // no key: applied every time
      expect(api.effects().map((e) => e.key)).toEqual(['k1', null, null]);
      // Failures on demand: before applying (a retry applies), and after (the retry gets the stored answer).
      api.failNext({ status: 503 });
      expect((await post('k2')).status).toBe(503);
      expect((await post('k2')).status).toBe(200);
      api.failNext({ afterApply: true });
      await expect(post('k3')).rejects.toThrow();
      expect((await post('k3')).headers.get('idempotent-replayed')).toBe('true');
      expect(api.effects().filter((e) => e.key === 'k2' || e.key === 'k3')).toHaveLength(2);

      // A handler checked against it: a crash after its call, retried with the same key, applied once.
      api.reset();
      const client = createOutboundClient({ name: 'notify', baseUrl: api.url, maxTries: 2, baseDelayMs: 10 });
      const notify = defineHandler({ name: 'notify-standin', source: 'stripe', type: 'test.charge', payload: anything }, async (_event, ctx) => {
        await ctx.step(
          'notify',
          async ({ idempotencyKey, signal }) => (await client.request<{ id: string }>({ method: 'POST', path: '/notifications', body: { n: 1 }, idempotencyKey, signal })).body,
        );
      });
      const report = await check(notify, event);
      expect(report.problems).toEqual([]);
      expect(api.effects()).toHaveLength(1);
      expect(api.replays()).toBeGreaterThanOrEqual(1); // the resumed attempt and the duplicates met the stored answer
    } finally {
      await api.close();
    }
  });

  it('drops the scratch databases it created, and the stale leftovers of killed checks with its prefix', async () => {
    const exists = async (names: string[]) =>
      (await db.pool.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1::text[])', [names])).rows.map((r) => r.datname);
    // This file's checks: every database they named, and none of them is left.
    const created = reports.flatMap((r) => r.databases);
    expect(created.length).toBeGreaterThan(10);
    expect(await exists(created)).toEqual([]);

    // Leftovers of checks killed mid-way, under a prefix of this test's own (other runs on the same
    // server never collide with it): one two hours old, one a minute old (a check still running
    // somewhere), one two hours old kept on purpose (keepDatabases).
    const prefix = `oncehook_tk${process.pid}_`;
    const seconds = Number((await db.pool.query<{ s: string }>('SELECT floor(extract(epoch FROM now()))::bigint::text AS s')).rows[0]!.s);
    const stale = `${prefix}${(seconds - 7_200).toString(36)}_0badc0de_tpl`;
    const running = `${prefix}${(seconds - 60).toString(36)}_0badc0de_1`;
    const kept = `${prefix}${(seconds - 7_200).toString(36)}_5ca1ab1e_1`;
    // keepDatabases marks what it keeps, so no later check removes it as a leftover.
    const keptReport = await check(
      defineHandler({ name: 'kept', source: 'stripe', type: 'test.charge', payload: anything }, async () => {}),
      event,
      {
        duplicates: 0,
        databasePrefix: prefix,
        keepDatabases: true,
      },
    );
    const comments = await db.pool.query<{ comment: string }>(`SELECT shobj_description(oid, 'pg_database') AS comment FROM pg_database WHERE datname = ANY($1::text[])`, [
      keptReport.databases,
    ]);
    expect(comments.rows.map((r) => r.comment)).toEqual(keptReport.databases.map(() => expect.stringMatching(/^kept by checkHandler/)));
    for (const name of keptReport.databases) await db.pool.query(`DROP DATABASE ${name}`);

    for (const name of [stale, running, kept]) await db.pool.query(`CREATE DATABASE ${name}`);
    await db.pool.query(`COMMENT ON DATABASE ${kept} IS '${comments.rows[0]!.comment}'`);

    const report = await checkHandler(
      defineHandler({ name: 'tidy', source: 'stripe', type: 'test.charge', payload: anything }, async () => {}),
      event,
      {
        duplicates: 0,
        databasePrefix: prefix,
      },
    );
    expect(report.removedLeftovers).toEqual([stale]);
    expect(report.databases.every((name) => name.startsWith(prefix))).toBe(true);
    expect((await exists([stale, running, kept, ...report.databases])).sort()).toEqual([running, kept].sort());
    for (const name of [running, kept]) await db.pool.query(`DROP DATABASE ${name}`);
    expect(T.events).toBe('oncehook.events');
  });

  it('refuses a prefix that would need quoting, saying what to write', async () => {
    await expect(
      check(
        defineHandler({ name: 'x', source: 'stripe', type: 'test.charge', payload: anything }, async () => {}),
        event,
        { databasePrefix: 'CI-job;' },
      ),
    ).rejects.toThrow(/prefix "CI-job;" .* must be 1 to 30 lower-case letters, digits or underscores, starting with a letter/);
  });
});
