/**
 * The operator's screens in a real Chromium (issue 11): a dead letter, delivered four times, is
 * re-driven from its event page and finishes; then one step of it is replayed from the page,
 * after a dry run shown first. The timeline lists deliveries, attempts, the failure with its
 * error, the operator actions and the steps in time order; the page shows the delivery count;
 * Bull Board lists the dead letter under FAILED; /admin leads to the events; no request leaves
 * the machine. Screenshots go to test/artifacts/ only.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ROOT, send, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import type { OncehookWorker } from 'oncehook';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CHROMIUM, launchChromium } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { shopifyOrder } from './helpers/orders.js';
import { type IngestHandle, q, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';
import { allSources } from '@oncehook/harness';

const USER = 'operator';
const PASSWORD = 'correct horse battery';
const ARTIFACTS = path.join(ROOT, 'test/artifacts');

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
let worker: OncehookWorker;
let browser: Browser;
let rowId: number;
let prefix: string;

beforeAll(async () => {
  if (!CHROMIUM.available) return;
  db = await createTestDatabase();
  sandbox = await startSandbox();
  prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources(), env: { ADMIN_USERNAME: USER, ADMIN_PASSWORD: PASSWORD } });
  await mkdir(ARTIFACTS, { recursive: true });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await worker?.close();
  await ingest?.close();
  await sandbox?.close();
  await db?.drop();
});

async function runOf(handler: string) {
  return (await q.getRuns(db.pool, rowId)).find((r) => r.handler === handler);
}

/** The timeline's entry kinds, top to bottom, consecutive repeats folded; checks its times never go back. */
async function timelineKinds(page: Page): Promise<string[]> {
  const rows = await page.$$eval('table.timeline tr[data-kind]', (trs) =>
    trs.map((tr) => ({ kind: tr.getAttribute('data-kind') ?? '', at: tr.querySelector('td')?.textContent ?? '' })),
  );
  const times = rows.map((r) => Date.parse(r.at));
  expect(times).toEqual([...times].sort((a, b) => a - b));
  return rows.map((r) => r.kind).filter((kind, i, all) => kind !== all[i - 1]);
}

it.skipIf(!CHROMIUM.available)('a dead letter delivered 4 times: re-driven from its page, then a step replayed after its dry run; the timeline in order', async () => {
  // The payment API declines the first charge (402): the run fails for good, a dead letter.
  sandbox.faults([{ service: 'payment', mode: 'status', status: 402, times: 1 }]);
  const order = await shopifyOrder(77);
  for (let i = 0; i < 4; i += 1) expect([200, 202]).toContain((await send(ingest.url, 'shopify', order)).status);
  const event = await q.getEventByKey(db.pool, 'shopify', 'wh-order-77');
  rowId = event!.id;
  // The worker starts after the four deliveries (so the timeline's order is known in advance).
  worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
  await waitFor(async () => ((await runOf('shop.shopify-orders'))?.state === 'failed' ? true : null), { what: 'the dead letter' });
  // Bull Board: the dead letter's job is FAILED (not completed), with the handler's error.
  const reasons = await waitFor(async () => (await ingest.queue.getFailed()).map((j) => j.failedReason).join('\n') || null, { what: 'the failed job' });
  expect(reasons).toMatch(/dead letter: handler "shop.shopify-orders" failed: PermanentError/);

  const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  const offMachine: string[] = [];
  page.on('request', (request) => {
    if (!request.url().startsWith(ingest.url)) offMachine.push(request.url());
  });

  // /admin leads to the events view.
  await page.goto(`${ingest.url}/admin`);
  expect(new URL(page.url()).pathname).toBe('/admin/events');
  await page.click(`a[href="/admin/events/${rowId}"]`);
  await expect.poll(() => page.textContent('h1')).toBe(`Event ${rowId}`);
  expect((await page.textContent('td.deliveries'))?.trim()).toBe('4');
  expect(await timelineKinds(page)).toEqual(['delivery', 'attempt', 'failure']);
  expect(await page.textContent('table.timeline')).toContain('failed for good (dead letter)');
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-event-dead-letter.png'), fullPage: true });

  // Re-drive from the page: a reason is required.
  const redrive = page.locator('form.redrive');
  await redrive.locator('button[value="redrive"]').click();
  await expect.poll(() => redrive.locator('.result').textContent()).toContain('Say why');
  await redrive.locator('input[name="reason"]').fill('card issuer fixed');
  await redrive.locator('button[value="redrive"]').click();
  await expect.poll(() => redrive.locator('.result').textContent()).toContain('Re-driven');
  await waitFor(async () => ((await runOf('shop.shopify-orders'))?.state === 'done' ? true : null), { what: 'the re-driven run done' });
  await page.reload();
  expect(await timelineKinds(page)).toEqual(['delivery', 'attempt', 'failure', 'operator', 'attempt', 'step', 'done']);
  const actions = await db.pool.query<{ actor: string; mode: string; reason: string }>(`SELECT actor, mode, reason FROM ${T.actions}`);
  expect(actions.rows).toEqual([{ actor: USER, mode: 'redrive', reason: 'card issuer fixed' }]);

  // Replay one step: the Replay button is disabled until the dry run of that choice is shown.
  const shipmentsBefore = sandbox.stats().fulfilment.applied;
  const replay = page.locator('form.replay[data-handler="shop.shopify-orders"]');
  await replay.locator('input[name="step"][value="request-shipment"]').check();
  expect(await replay.locator('button[value="replay"]').isDisabled()).toBe(true);
  await replay.locator('button[value="preview"]').click();
  await expect.poll(() => replay.locator('.result').textContent()).toContain('run again: request-shipment');
  const plan = (await replay.locator('.result').textContent()) ?? '';
  expect(plan).toMatch(/new key oncehook-[0-9a-f]{48}/);
  expect(plan).toContain('reuse: charge');
  expect(await db.pool.query(`SELECT 1 FROM ${T.actions} WHERE mode = 'replay'`).then((r) => r.rowCount)).toBe(0); // the dry run changed nothing
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-event-replay-plan.png'), fullPage: true });
  await replay.locator('input[name="reason"]').fill('parcel lost');
  await replay.locator('button[value="replay"]').click();
  await expect.poll(() => replay.locator('.result').textContent()).toContain('Replayed');
  await waitFor(
    async () => {
      const run = await runOf('shop.shopify-orders');
      return run?.state === 'done' && run.generation === 1 ? true : null;
    },
    { what: 'the replay done' },
  );
  expect(sandbox.stats().fulfilment.applied).toBe(shipmentsBefore + 1);
  await page.reload();
  const kinds = await timelineKinds(page);
  // ... the replay, the steps it reused (listed with it), then its attempt running the one step again.
  expect(kinds.slice(-5)).toEqual(['operator', 'step', 'attempt', 'step', 'done']);
  expect(await page.textContent('table.timeline')).toContain('reused from generation 0 (not run again)');
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-event-timeline.png'), fullPage: true });

  // Bull Board's page, too, asks nothing of the internet.
  await page.goto(`${ingest.url}/admin/queues`);
  await page.waitForSelector('text=webhook-events', { timeout: 15_000 });
  expect(offMachine).toEqual([]);
  await context.close();
});

it.skipIf(!CHROMIUM.available)(
  'pause a handler from the Pauses page (a reason required): a delivery is accepted and its run waits, shown as paused; Resume runs it, once',
  async () => {
    worker ??= await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
    const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${ingest.url}/admin/events`);
    await page.click('nav a[href="/admin/pauses"]');
    await expect.poll(() => page.textContent('h1')).toBe('Pauses');
    expect(await page.textContent('body')).toContain('Nothing is paused.');

    const pause = page.locator('form.pause-action[data-url="/admin/api/pauses"]');
    await pause.locator('input[name="name"]').fill('shop.shopify-orders');
    await pause.locator('button').click();
    await expect.poll(() => pause.locator('.result').textContent()).toContain('Say why');
    expect(await q.listPauses(db.pool)).toEqual([]);
    await pause.locator('input[name="reason"]').fill('fulfilment API down');
    await pause.locator('button').click();
    await expect.poll(() => pause.locator('.result').textContent()).toContain('Paused handler "shop.shopify-orders"');
    await expect.poll(() => page.textContent('table')).toContain('fulfilment API down');

    // Paused: a delivery is still accepted; its run waits, and the event page says why.
    const shipped = sandbox.stats().fulfilment.applied;
    expect((await send(ingest.url, 'shopify', await shopifyOrder(78))).status).toBe(202);
    const event = await waitFor(
      async () => {
        const e = await q.getEventByKey(db.pool, 'shopify', 'wh-order-78');
        const run = e ? (await q.getRuns(db.pool, e.id))[0] : undefined;
        return run?.waiting === 'paused' ? e : null;
      },
      { what: 'the run waiting: paused' },
    );
    await page.goto(`${ingest.url}/admin/events/${event!.id}`);
    expect(await page.textContent('body')).toContain('received (waiting: paused)');
    await page.screenshot({ path: path.join(ARTIFACTS, 'admin-event-paused.png'), fullPage: true });

    await page.goto(`${ingest.url}/admin/pauses`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'admin-pauses.png'), fullPage: true });
    const resume = page.locator('form.pause-action[data-url="/admin/api/pauses/resume"][data-name="shop.shopify-orders"]');
    await resume.locator('input[name="reason"]').fill('fulfilment API back');
    await resume.locator('button').click();
    await expect.poll(() => resume.locator('.result').textContent()).toContain('Resumed handler "shop.shopify-orders": 1 waiting run(s) enqueued');
    await waitFor(async () => ((await q.getRuns(db.pool, event!.id))[0]?.state === 'done' ? true : null), { what: 'the resumed run done' });
    expect(sandbox.stats().fulfilment.applied).toBe(shipped + 1);
    const actions = await db.pool.query<{ actor: string; mode: string; target: string; reason: string }>(
      `SELECT actor, mode, target, reason FROM ${T.actions} WHERE target IS NOT NULL ORDER BY id`,
    );
    expect(actions.rows).toEqual([
      { actor: USER, mode: 'pause', target: 'handler:shop.shopify-orders', reason: 'fulfilment API down' },
      { actor: USER, mode: 'resume', target: 'handler:shop.shopify-orders', reason: 'fulfilment API back' },
    ]);
    await context.close();
  },
);
