/**
 * The operator console (issue 33), against real Postgres, Redis and a real Chromium:
 *
 * - the search: among 10,000 events, one found by a payload field from the events page (its URL
 *   is the search); every filter of the admin API (source, type, state, waiting, handler, event
 *   id without its source, time range, payload equals / contains / anywhere) and keyset pages
 *   that neither skip nor repeat while events arrive;
 * - failure groups: error messages that differ only by ids and numbers form one group; resolving
 *   hides a group until a run of it fails again; 50 runs failed by a downstream 422 form one group
 *   on the Failures page, re-driven from there after the fix (preview first): every run done,
 *   every effect once.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { allSources, ROOT, send, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import type { OncehookWorker } from 'oncehook';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, launchChromium } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { shopifyOrder } from './helpers/orders.js';
import { type IngestHandle, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';

const USER = 'operator';
const PASSWORD = 'correct horse battery';
const ARTIFACTS = path.join(ROOT, 'test/artifacts');
const auth = { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
const FILLED = 10_000;

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: OncehookWorker | undefined;
let browser: Browser;
let prefix: string;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources(), env: { ADMIN_USERNAME: USER, ADMIN_PASSWORD: PASSWORD } });
  await mkdir(ARTIFACTS, { recursive: true });
  if (CHROMIUM.available) {
    browser = await launchChromium();
  }
});
afterAll(async () => {
  await browser?.close();
  await worker?.close();
  await ingest?.close();
  await sandbox?.close();
  await db?.drop();
});

type Listed = { events: { id: number; provider: string; eventId: string; type: string }[]; next: number | null };

async function search(query: string): Promise<Listed> {
  const response = await fetch(`${ingest.url}/admin/api/events?${query}`, { headers: auth });
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as Listed;
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${ingest.url}${url}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

describe('search', () => {
  let needle: number;

  beforeAll(async () => {
    // 10,000 events as the pipeline stores them (Stripe-like payloads over 500 customers, two
    // sources, received over the last 10,000 minutes), and one needle among them.
    await db.pool.query(
      `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state, received_at, updated_at)
       SELECT CASE WHEN g % 4 = 0 THEN 'stripe-eu' ELSE 'stripe' END, 'stripe', 'evt_fill_' || g,
              CASE WHEN g % 3 = 0 THEN 'invoice.paid' ELSE 'payment_intent.succeeded' END,
              jsonb_build_object('id', 'evt_fill_' || g, 'data', jsonb_build_object('object', jsonb_build_object('customer', 'cus_' || (g % 500), 'amount', g, 'description', 'order ' || g))),
              'done', now() - (${FILLED} - g) * interval '1 minute', now()
         FROM generate_series(1, ${FILLED}) g`,
    );
    const { rows } = await db.pool.query<{ id: number }>(
      `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state, received_at)
       VALUES ('stripe', 'stripe', 'evt_needle', 'invoice.paid', '{"id":"evt_needle","data":{"object":{"customer":"cus_needle","amount":4200000,"description":"A Needle In The Haystack"}}}',
               'received', now() - interval '10 seconds') RETURNING id`,
    );
    needle = rows[0]!.id;
    await db.pool.query(`INSERT INTO ${T.runs} (event_row_id, handler, state, waiting, waiting_since) VALUES ($1, 'shop.payments', 'received', 'paused', now())`, [needle]);
    // (Rows arrive in id order, as claims do: a time range is searched as a range of ids.)
    await db.pool.query(`ANALYZE ${T.events}`);
  });

  it('finds one event by a payload field among 10,000, by every filter, and pages without skipping or repeating', async () => {
    const ids = (l: Listed) => l.events.map((e) => e.id);
    expect(ids(await search('since=10d&payload=data.object.customer%3Dcus_needle'))).toEqual([needle]);
    // Equals compares the field's text: a number matches its digits.
    expect(ids(await search('since=10d&payload=data.object.amount%3D4200000'))).toEqual([needle]);
    // Contains is any case, on the field or (no path) anywhere in the payload.
    expect(ids(await search('since=10d&payload=data.object.description~needle%20in'))).toEqual([needle]);
    expect(ids(await search('since=10d&payload=~HAYSTACK'))).toEqual([needle]);
    expect((await search('since=10d&payload=data.object.customer%3Dcus_7&limit=1000')).events).toHaveLength(FILLED / 500);
    // The provider's id without its source: looked up under each source stored.
    expect(ids(await search('event_id=evt_needle'))).toEqual([needle]);
    expect(ids(await search('event_id=evt_needle&source=stripe-eu'))).toEqual([]);
    expect(ids(await search('waiting=paused'))).toEqual([needle]);
    expect(ids(await search('waiting=paused&handler=shop.payments&state=received'))).toEqual([needle]);
    expect(ids(await search('waiting=rate-limit'))).toEqual([]);
    expect(ids(await search('destination=shop.payments'))).toEqual([needle]);
    // Time ranges: 5000 minutes ago give or take 40 s holds one event; the last 30 s the needle and the newest.
    const around = new Date(Date.now() - 5000 * 60_000);
    const range = await search(`since=${new Date(around.getTime() - 40_000).toISOString()}&until=${new Date(around.getTime() + 40_000).toISOString()}`);
    expect(range.events.map((e) => e.eventId)).toEqual(['evt_fill_5000']);
    expect((await search('since=30s')).events.map((e) => e.eventId)).toEqual(['evt_needle', `evt_fill_${FILLED}`]);
    const since = await search('since=90m&limit=1000');
    expect(since.events.map((e) => e.eventId)).toEqual(['evt_needle', ...Array.from({ length: 90 }, (_, i) => `evt_fill_${FILLED - i}`)]);
    const eu = await search('source=stripe-eu&type=invoice.paid&limit=1000');
    expect(eu.events).toHaveLength(Math.floor(FILLED / 12));
    expect(eu.events.every((e) => e.provider === 'stripe-eu' && e.type === 'invoice.paid')).toBe(true);

    // Keyset pages over all 10,001: newest first, disjoint, complete, even with events arriving between pages.
    const seen: number[] = [];
    let query = 'limit=1000';
    for (let page = 0; ; page += 1) {
      const listed = await search(query);
      seen.push(...ids(listed));
      if (page === 2) {
        await db.pool.query(`INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state) VALUES ('stripe', 'stripe', 'evt_late', 'invoice.paid', '{}', 'done')`);
      }
      if (listed.next === null) break;
      query = `limit=1000&before=${listed.next}`;
    }
    expect(seen).toHaveLength(FILLED + 1);
    expect(new Set(seen).size).toBe(FILLED + 1);
    expect(seen).toEqual([...seen].sort((a, b) => b - a));
    await db.pool.query(`DELETE FROM ${T.events} WHERE event_id = 'evt_late'`);
  });

  it.skipIf(!CHROMIUM.available)('the events page: the search is a form whose URL is the search; the needle found by its payload field', async () => {
    const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    await page.goto(`${ingest.url}/admin/`);
    expect(new URL(page.url()).pathname).toBe('/admin/events');
    await page.fill('form.search input[name=payload]', 'data.object.customer=cus_needle');
    await page.fill('form.search input[name=since]', '10d');
    await page.click('form.search button[type=submit]');
    await page.waitForURL(/payload=data\.object\.customer%3Dcus_needle/);
    const rows = await page.$$eval('table tr td:first-child a', (links) => links.map((a) => a.textContent));
    expect(rows).toEqual([String(needle)]);
    expect(await page.textContent('body')).toContain('Matching events (1, newest first)');
    await page.screenshot({ path: path.join(ARTIFACTS, 'admin-search.png'), fullPage: true });
    // A bad filter in a shared URL: the page says which and why, and lists nothing.
    const bad = await page.goto(`${ingest.url}/admin/events?payload=data.object.customer`);
    expect(bad?.status()).toBe(400);
    expect(await page.textContent('p.refused')).toContain('payload: "data.object.customer" has no = or ~');
    await context.close();
  });
});

describe('failure groups', () => {
  it('messages that differ by ids and numbers are one group; a status code is kept; resolving hides a group until it fails again', async () => {
    const { rows } = await db.pool.query<{ id: number }>(
      `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state)
       SELECT 'stripe', 'stripe', 'evt_group_' || g, 'invoice.paid', '{}', 'failed' FROM generate_series(1, 5) g RETURNING id`,
    );
    const messages = [
      'PermanentError: customer cus_NffrFeUfNV2Hib not found for order 123456',
      'PermanentError: customer cus_A1b2C3d4 not found for order 7',
      'PermanentError: payment api answered 422: currency not supported (request 3f2c9a1e-1b2c-4d5e-8f90-0a1b2c3d4e5f)',
      'PermanentError: payment api answered 409: currency not supported (request 0a1b2c3d-1b2c-4d5e-8f90-3f2c9a1e0000)',
    ];
    for (const [i, message] of messages.entries()) {
      await db.pool.query(
        `INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, last_error, error_shape) VALUES ($1, 'shop.payments', 'failed', 1, $2, oncehook.error_shape($2))`,
        [rows[i]!.id, message],
      );
    }
    // A run retrying after a failure of the first shape (received again, attempts > 0).
    await db.pool.query(
      `INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, last_error, error_shape) VALUES ($1, 'shop.payments', 'received', 2, $2, oncehook.error_shape($2))`,
      [rows[4]!.id, 'PermanentError: customer cus_ZZ99zz99 not found for order 55'],
    );
    const groups = async (query = '') => {
      const response = await fetch(`${ingest.url}/admin/api/failure-groups${query}`, { headers: auth });
      expect(response.status).toBe(200);
      return ((await response.json()) as { groups: { id: string; shape: string; failed: number; retrying: number; resolved: boolean }[] }).groups;
    };
    const found = await groups();
    expect(found.map((g) => [g.shape, g.failed, g.retrying]).sort()).toEqual([
      ['PermanentError: customer <id> not found for order #', 2, 1],
      ['PermanentError: payment api answered 409: currency not supported (request <uuid>)', 1, 0],
      ['PermanentError: payment api answered 422: currency not supported (request <uuid>)', 1, 0],
    ]);
    const customer = found.find((g) => g.shape.includes('customer'))!;
    // Its events, by the group filter: the three events of the group, nothing else.
    expect((await search(`group=${customer.id}`)).events.map((e) => e.eventId).sort()).toEqual(['evt_group_1', 'evt_group_2', 'evt_group_5']);

    expect((await post(`/admin/api/failure-groups/${customer.id}/resolve`, { reason: 'customers restored' })).status).toBe(200);
    expect((await groups()).map((g) => g.id)).not.toContain(customer.id);
    expect((await groups('?resolved=true')).find((g) => g.id === customer.id)?.resolved).toBe(true);
    // A run of the group fails again after the resolution: the group is open again.
    await db.pool.query(`UPDATE ${T.runs} SET updated_at = now() + interval '1 second' WHERE last_error LIKE '%cus_A1b2C3d4%'`);
    expect((await groups()).find((g) => g.id === customer.id)).toMatchObject({ resolved: false, failed: 2 });
    // Nothing of a group that does not exist is resolved.
    expect((await post('/admin/api/failure-groups/0123456789ab/resolve', { reason: 'x' })).status).toBe(409);
    await db.pool.query(`DELETE FROM ${T.events} WHERE event_id LIKE 'evt_group_%'`);
  });

  it.skipIf(!CHROMIUM.available)(
    '50 runs failed by a downstream 422: one group on the Failures page, re-driven from it after the fix, every effect once',
    async () => {
      // The payment API refuses every charge (422) until it is fixed.
      sandbox.faults([{ service: 'payment', mode: 'status', status: 422, probability: 1 }]);
      worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
      const orders = Array.from({ length: 50 }, (_, i) => 900 + i);
      for (const n of orders) expect([200, 202]).toContain((await send(ingest.url, 'shopify', await shopifyOrder(n))).status);
      const failedRuns = async () =>
        (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.runs} WHERE handler = 'shop.shopify-orders' AND state = 'failed'`)).rows[0]!.n;
      await waitFor(async () => ((await failedRuns()) === 50 ? true : null), { what: '50 dead letters', timeoutMs: 60_000 }).catch(async (error) => {
        const states = await db.pool.query(`SELECT r.handler, r.state, r.attempts, left(r.last_error, 120) AS e, count(*)::int FROM ${T.runs} r GROUP BY 1, 2, 3, 4`);
        const events = await db.pool.query(`SELECT provider, state, note, count(*)::int FROM ${T.events} WHERE provider = 'shopify' GROUP BY 1, 2, 3`);
        throw new Error(`${(error as Error).message}: ${JSON.stringify(states.rows)} ${JSON.stringify(events.rows)}`);
      });

      const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1400, height: 1000 } });
      const page = await context.newPage();
      await page.goto(`${ingest.url}/admin/failures`);
      const group = page.locator('section.group', { hasText: 'shop.shopify-orders' });
      expect(await group.locator('h2').textContent()).toContain('50 run(s) (50 failed, 0 retrying)');
      expect(await group.locator('code.shape').textContent()).toMatch(/payment API answered 422/);
      await page.screenshot({ path: path.join(ARTIFACTS, 'admin-failures.png'), fullPage: true });
      // Its events link lists exactly them.
      const groupId = await group.getAttribute('data-group');
      expect((await search(`group=${groupId}&limit=100`)).events).toHaveLength(50);

      // The fix is out; re-drive the group: the preview first, then the action.
      sandbox.faults([]);
      const form = group.locator('form.bulk');
      await form.locator('input[name=reason]').fill('payment API fixed');
      expect(await form.locator('button[value=redrive]').isDisabled()).toBe(true);
      await form.locator('button[value=preview]').click();
      await expect.poll(() => form.locator('.result').textContent(), { timeout: 30_000 }).toMatch(/^50 event\(s\) would be re-driven: rows /);
      expect(await failedRuns()).toBe(50);
      await form.locator('button[value=redrive]').click();
      await expect.poll(() => form.locator('.result').textContent(), { timeout: 60_000 }).toMatch(/^Re-driven: 50 of 50 event\(s\)/);
      const doneRuns = async () =>
        (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.runs} WHERE handler = 'shop.shopify-orders' AND state = 'done'`)).rows[0]!.n;
      await waitFor(async () => ((await doneRuns()) === 50 ? true : null), { what: '50 runs done after the re-drive', timeoutMs: 60_000 });
      // Every charge applied once (the refused ones applied nothing), and no key twice.
      const payment = sandbox.stats().payment;
      expect(payment.applied).toBe(50);
      expect(Object.values(payment.appliedByKey).every((n) => n === 1)).toBe(true);
      const actions = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.actions} WHERE mode = 'redrive' AND reason = 'payment API fixed'`);
      expect(actions.rows[0]!.n).toBe(50);
      await page.reload();
      expect(await page.locator('section.group', { hasText: 'shop.shopify-orders' }).count()).toBe(0);
      await context.close();
    },
    180_000,
  );
});
