/**
 * Admin: Bull Board, the events view and the admin API exist only with credentials, and only
 * behind them. Checked over HTTP and in a real headless Chromium (Debian's, driven by
 * playwright-core), with screenshots in test/artifacts/.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CHROMIUM, launchChromium } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ROOT } from '@oncehook/harness';
import { type IngestHandle, q, startIngest, testPrefix, seedRun } from './helpers/stack.js';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';

const TOKEN = 'admin-token-0123456789abcdef';
const USER = 'operator';
const PASSWORD = 'correct horse battery';
const basic = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
const ARTIFACTS = path.join(ROOT, 'test/artifacts');

let db: TestDatabase;
let ingest: IngestHandle;
let readOnly: IngestHandle;
let noAdmin: IngestHandle;
let browser: Browser;
let failedId: number;

beforeAll(async () => {
  db = await createTestDatabase();
  const prefix = testPrefix();
  // Wrong credentials on every route below: more than the default failed logins per minute (their throttle: admin-budget.test.ts).
  ingest = await startIngest({ databaseUrl: db.url, prefix, env: { ADMIN_TOKEN: TOKEN, ADMIN_USERNAME: USER, ADMIN_PASSWORD: PASSWORD, ADMIN_LOGIN_FAILURES_PER_MINUTE: '1000' } });
  readOnly = await startIngest({ databaseUrl: db.url, prefix, env: { ADMIN_TOKEN: TOKEN, ADMIN_READ_ONLY: 'true' } });
  noAdmin = await startIngest({ databaseUrl: db.url, prefix });
  // A dead letter to look at, and a duplicate delivery of it.
  await deliver(ingest.url, signStripe(paymentSucceeded('evt_admin_failed')));
  await deliver(ingest.url, signStripe(paymentSucceeded('evt_admin_failed')));
  const row = await q.getEventByKey(db.pool, 'stripe', 'evt_admin_failed');
  await seedRun(db.pool, row!.id, { state: 'failed', attempts: 3, lastError: 'PermanentError: card declined' });
  failedId = row!.id;
  await mkdir(ARTIFACTS, { recursive: true });
  // Skipped, and named in the run's output, on a machine without Chromium (helpers/tools.ts).
  if (!CHROMIUM.available) return;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await Promise.all([ingest, readOnly, noAdmin].map((i) => i?.close()));
  await db.drop();
});

it('refuses every admin route without credentials (401) and with wrong ones', async () => {
  for (const route of ['/admin/events', `/admin/events/${failedId}`, '/admin/queues', '/admin/queues/api/queues', '/admin/api/events', `/admin/api/events/${failedId}`]) {
    const none = await fetch(`${ingest.url}${route}`);
    expect(none.status, route).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect((await fetch(`${ingest.url}${route}`, { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status, route).toBe(401);
    expect((await fetch(`${ingest.url}${route}`, { headers: { authorization: `Basic ${Buffer.from(`${USER}:nope`).toString('base64')}` } })).status, route).toBe(401);
  }
  const post = await fetch(`${ingest.url}/admin/api/events/${failedId}/redrive`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"reason":"x"}' });
  expect(post.status).toBe(401);
  expect((await q.getEvent(db.pool, failedId))?.state).toBe('failed');
});

it('mounts no admin route at all without configured credentials', async () => {
  expect((await fetch(`${noAdmin.url}/admin/events`)).status).toBe(404);
  expect((await fetch(`${noAdmin.url}/admin/queues`)).status).toBe(404);
});

it('serves the admin API with a token or basic auth; read-only refuses actions', async () => {
  const list = await fetch(`${ingest.url}/admin/api/events?state=failed`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(list.status).toBe(200);
  expect(((await list.json()) as { events: unknown[] }).events).toEqual([expect.objectContaining({ id: failedId, state: 'failed' })]);
  expect((await fetch(`${ingest.url}/admin/api/events?state=bogus`, { headers: { authorization: basic } })).status).toBe(400);

  const ro = await fetch(`${readOnly.url}/admin/api/events/${failedId}/replay`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: '{"reason":"x"}',
  });
  expect(ro.status).toBe(403);
  const noReason = await fetch(`${ingest.url}/admin/api/events/${failedId}/redrive`, {
    method: 'POST',
    headers: { authorization: basic, 'content-type': 'application/json' },
    body: '{}',
  });
  expect(noReason.status).toBe(400);
  const dry = await fetch(`${ingest.url}/admin/api/redrive`, {
    method: 'POST',
    headers: { authorization: basic, 'content-type': 'application/json' },
    body: '{"state":"failed","dry_run":true}',
  });
  expect(await dry.json()).toMatchObject({ dryRun: true, matched: 1 });
  expect((await q.getEvent(db.pool, failedId))?.state).toBe('failed');
});

it.skipIf(!CHROMIUM.available)('renders the events view and Bull Board in a real browser behind basic auth', async () => {
  // Without credentials the browser is refused: the navigation fails on the 401 challenge,
  // and the same request from the browser context gets the 401 itself.
  const anonymous = await browser.newContext();
  await expect((await anonymous.newPage()).goto(`${ingest.url}/admin/events`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
  expect((await anonymous.request.get(`${ingest.url}/admin/events`)).status()).toBe(401);
  expect((await anonymous.request.get(`${ingest.url}/admin/queues`)).status()).toBe(401);
  await anonymous.close();

  const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const events = await page.goto(`${ingest.url}/admin/events`);
  expect(events?.status()).toBe(200);
  await expect.poll(() => page.textContent('body')).toContain('Dead letters (1)');
  expect(await page.textContent('body')).toContain('stripe/evt_admin_failed');
  expect(await page.textContent('body')).toMatch(/Recent duplicates \(seen by this ingest instance\)\s*At/);
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-events.png'), fullPage: true });

  await page.click(`a[href="/admin/events/${failedId}"]`);
  await expect.poll(() => page.textContent('h1')).toBe(`Event ${failedId}`);
  expect(await page.textContent('body')).toContain('PermanentError: card declined');
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-event.png'), fullPage: true });

  const board = await page.goto(`${ingest.url}/admin/queues`);
  expect(board?.status()).toBe(200);
  await page.waitForSelector('text=webhook-events', { timeout: 15_000 });
  await page.screenshot({ path: path.join(ARTIFACTS, 'admin-bull-board.png'), fullPage: true });
  await context.close();
});
