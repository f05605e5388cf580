/**
 * The Activity page (issue 33, "pictures"): a real ingest and worker write the minute's
 * deliveries and run attempts from their own counters (ACTIVITY_FLUSH_MS), the reconciler's
 * leader samples the backlog; the API sums them to what was sent (new, duplicates, rejected;
 * runs done with a latency; runs waiting on a pause), the page draws them in a real Chromium.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { allSources, ROOT, send, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import type { OncehookWorker } from 'oncehook';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CHROMIUM, launchChromium } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { shopifyOrder } from './helpers/orders.js';
import { type IngestHandle, startIngest, startWorker, testPrefix } from './helpers/stack.js';

const USER = 'operator';
const PASSWORD = 'correct horse battery';
const auth = { authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}` };
const FLUSH = { ACTIVITY_FLUSH_MS: '200' };

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: OncehookWorker;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  const prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources(), env: { ADMIN_USERNAME: USER, ADMIN_PASSWORD: PASSWORD, ...FLUSH } });
  worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url, env: FLUSH });
});
afterAll(async () => {
  await worker?.close();
  await ingest?.close();
  await sandbox?.close();
  await db?.drop();
});

type Series = { times: string[] } & Record<'deliveries' | 'runs' | 'latency' | 'backlog' | 'waiting', { lines: { name: string; values: number[] }[] }>;

async function activity(range = '1h'): Promise<{ status: number; json: Series & { message?: string } }> {
  const response = await fetch(`${ingest.url}/admin/api/activity?range=${range}`, { headers: auth });
  return { status: response.status, json: (await response.json()) as Series & { message?: string } };
}

const total = (chart: Series['deliveries'], name: string) => chart.lines.find((l) => l.name === name)!.values.reduce((a, b) => a + b, 0);
const latest = (chart: Series['deliveries'], name: string) => chart.lines.find((l) => l.name === name)!.values.at(-1);

it('deliveries by result, runs by outcome with their latency, and the backlog: written by the processes, summed by the API, drawn by the page', async () => {
  for (let n = 1; n <= 6; n += 1) expect((await send(ingest.url, 'shopify', await shopifyOrder(300 + n))).status).toBe(202);
  for (const n of [301, 302]) expect((await send(ingest.url, 'shopify', await shopifyOrder(300 + n - 300))).status).toBe(200);
  const forged = await shopifyOrder(399);
  for (let i = 0; i < 2; i += 1) {
    expect((await send(ingest.url, 'shopify', { body: forged.body, headers: { ...forged.headers, 'x-shopify-hmac-sha256': Buffer.alloc(32).toString('base64') } })).status).toBe(
      401,
    );
  }
  const series = await waitFor(
    async () => {
      const { json } = await activity();
      // Every count this test sent, not only the first ones: ingest writes its minute in more
      // than one flush, so the duplicates can land after the new deliveries.
      const sent = total(json.deliveries, 'new') === 6 && total(json.deliveries, 'duplicate') >= 2 && total(json.deliveries, 'rejected') >= 2;
      return sent && total(json.runs, 'done') >= 6 ? json : null;
    },
    { what: 'the minute written by ingest and the worker', timeoutMs: 30_000 },
  );
  expect(total(series.deliveries, 'duplicate')).toBe(2);
  expect(total(series.deliveries, 'rejected')).toBe(2);
  expect(total(series.runs, 'done')).toBe(6);
  expect(total(series.runs, 'failed')).toBe(0);
  expect(series.times).toHaveLength(60);
  expect(Math.max(...series.latency.lines.find((l) => l.name === 'p50')!.values)).toBeGreaterThan(0);

  // Runs held by a pause: the leader's pass samples them.
  const ops = (await import('@oncehook/core')).createOperations({ pool: worker.pool, queries: worker.queries, queue: worker.queues });
  await ops.pause({ scope: 'handler', name: 'shop.shopify-orders' }, 'test', 'activity test');
  for (const n of [307, 308]) expect((await send(ingest.url, 'shopify', await shopifyOrder(n))).status).toBe(202);
  const waiting = await waitFor(
    async () => {
      await worker.eventWorker.reconciler.runOnce();
      const { json } = await activity();
      return latest(json.waiting, 'paused') === 2 ? json : null;
    },
    { what: 'two runs waiting on the pause, sampled', timeoutMs: 30_000 },
  );
  expect(latest(waiting.backlog, 'received')).toBe(2);
  await ops.resume({ scope: 'handler', name: 'shop.shopify-orders' }, 'test', 'done');

  // The day's view: 288 steps of 5 minutes, the same totals.
  const day = await waitFor(
    async () => {
      const { json } = await activity('1d');
      return Math.round(total(json.deliveries, 'new') * 5) === 8 ? json : null;
    },
    { what: 'the eight new deliveries in the day view', timeoutMs: 30_000 },
  );
  expect(day.times).toHaveLength(288);
  // A range that is not one: 400, nothing read.
  const bad = await activity('2h');
  expect(bad.status).toBe(400);
  expect(bad.json.message).toBe('range is 1h or 1d');

  // The handler pages: what each loaded handler declares, its runs, its last hour, its workers.
  const handlers = async () =>
    (
      (await (await fetch(`${ingest.url}/admin/api/handlers`, { headers: auth })).json()) as {
        handlers: { name: string; workers: string[]; lastHour: { done: number }; settings: unknown }[];
      }
    ).handlers;
  const orders = await waitFor(
    async () => {
      const found = (await handlers()).find((h) => h.name === 'shop.shopify-orders');
      return found?.lastHour.done === 8 ? found : null;
    },
    { what: 'the resumed runs in the handler page', timeoutMs: 30_000 },
  );
  expect(orders.workers).toHaveLength(1);
  expect(orders.workers[0]).toMatch(/^[^:]+:\d+:[0-9a-f]{8}$/);
  expect(orders.settings).toMatchObject({ priority: 'normal' });
  const handlerPage = await fetch(`${ingest.url}/admin/handlers/shop.shopify-orders`, { headers: auth });
  expect(handlerPage.status).toBe(200);
  const text = await handlerPage.text();
  expect(text).toContain(orders.workers[0]);
  expect(text).toContain('Run attempts per minute');
  const listPage = await (await fetch(`${ingest.url}/admin/handlers`, { headers: auth })).text();
  expect(listPage).toMatch(/shop\.shopify-orders<\/a><\/td><td>shopify orders\/create<\/td><td>no limits<\/td>/);
  expect(listPage).toContain('8 done, 0 retried, 0 failed');
  expect((await fetch(`${ingest.url}/admin/handlers/no.such-handler`, { headers: auth })).status).toBe(404);

  if (!CHROMIUM.available) return;
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1100, height: 1300 } });
    const page = await context.newPage();
    await page.goto(`${ingest.url}/admin/activity`);
    expect(await page.locator('figure.chart').count()).toBe(5);
    const points = await page.locator('figure.chart').first().locator('polyline[data-line="new"]').getAttribute('points');
    expect(points?.split(' ')).toHaveLength(60);
    expect(await page.locator('figure.chart').first().locator('figcaption').textContent()).toMatch(/new \(last [\d.]+, max [1-9]/);
    await mkdir(path.join(ROOT, 'test/artifacts'), { recursive: true });
    await page.screenshot({ path: path.join(ROOT, 'test/artifacts/admin-activity.png'), fullPage: true });
    await page.goto(`${ingest.url}/admin/handlers`);
    expect(await page.locator('tr[data-handler="shop.shopify-orders"] td.workers').textContent()).toBe('1');
    await page.screenshot({ path: path.join(ROOT, 'test/artifacts/admin-handlers.png'), fullPage: true });
    await context.close();
  } finally {
    await browser.close();
  }
  // A worker that stops takes itself off its handlers.
  await worker.close();
  expect((await handlers()).find((h) => h.name === 'shop.shopify-orders')!.workers).toEqual([]);
}, 120_000);
