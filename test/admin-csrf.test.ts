/**
 * CSRF and clickjacking on the admin (issue 10, finding 1), attacked from a real browser: an
 * operator logged in to the admin with basic auth (the browser answers the admin's challenge
 * with their credentials) opens a hostile page on another site. The page auto-submits
 * text/plain forms shaped as JSON to the replay, the bulk re-drive and Bull Board's add-job
 * routes, and fires no-cors fetches. Every one is refused (403) and nothing changes: the dead
 * letter stays failed, no operator action is recorded, no job is added. The same replay from
 * the admin's own page works.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Response as PageResponse } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { CHROMIUM, launchChromium } from './helpers/browser.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, q, seedRun, startIngest, T, testPrefix } from './helpers/stack.js';

const USER = 'operator';
const PASSWORD = 'correct horse battery';
const TOKEN = 'admin-token-0123456789abcdef';

let db: TestDatabase;
let ingest: IngestHandle;
let browser: Browser;
let evil: Server;
let evilPort: number;
let failedId: number;
/** The hostile pages, by path; each gets the admin's URL baked in. */
const pages = new Map<string, string>();

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), env: { ADMIN_USERNAME: USER, ADMIN_PASSWORD: PASSWORD, ADMIN_TOKEN: TOKEN } });
  await deliver(ingest.url, signStripe(paymentSucceeded('evt_csrf_target')));
  const row = await q.getEventByKey(db.pool, 'stripe', 'evt_csrf_target');
  await seedRun(db.pool, row!.id, { state: 'failed', attempts: 3, lastError: 'PermanentError: card declined' });
  failedId = row!.id;
  await ingest.queue.obliterate({ force: true });

  evil = createServer((req, res) => {
    const page = pages.get(req.url ?? '');
    res.writeHead(page ? 200 : 404, { 'content-type': 'text/html' });
    res.end(page ?? 'not found');
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  evilPort = (evil.address() as AddressInfo).port;

  // Skipped, and named in the run's output, on a machine without Chromium (helpers/tools.ts).
  if (!CHROMIUM.available) return;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => evil?.close(resolve));
  await ingest?.close();
  await db?.drop();
});

/**
 * A page that auto-submits a text/plain form whose body IS the JSON: the browser sends
 * `name=value`, so the name is the JSON up to its last string value and the value closes it
 * (`{"reason":"csrf` + `=` + `"}`). The last value of `json` must be a string.
 */
function jsonShapedForm(action: string, json: Record<string, unknown>): string {
  const text = JSON.stringify(json);
  if (!text.endsWith('"}')) throw new Error('the last value must be a string');
  const name = text.slice(0, -2).replace(/'/g, '&#39;');
  return `<!doctype html><body><form method="POST" enctype="text/plain" action="${action}"><input name='${name}' value='"}'></form>
<script>document.forms[0].submit()</script></body>`;
}

/** What a hostile page's requests to the admin were answered. */
async function attack(context: BrowserContext, pageUrl: string, expectedRequests: number): Promise<number[]> {
  const page = await context.newPage();
  const statuses: number[] = [];
  const seen = new Promise<void>((resolve) => {
    page.on('response', (response: PageResponse) => {
      if (!response.url().startsWith(`${ingest.url}/admin/`)) return;
      statuses.push(response.status());
      if (statuses.length >= expectedRequests) resolve();
    });
  });
  await page.goto(pageUrl);
  await Promise.race([seen, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  await page.close();
  return statuses;
}

async function nothingChanged(): Promise<void> {
  expect((await q.getEvent(db.pool, failedId))?.state).toBe('failed');
  const runs = await db.pool.query<{ state: string; generation: number }>(`SELECT state, generation FROM ${T.runs} WHERE event_row_id = $1`, [failedId]);
  expect(runs.rows).toEqual([{ state: 'failed', generation: 0 }]);
  const actions = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.actions}`);
  expect(actions.rows[0]?.n).toBe(0);
  const counts = await ingest.queue.getJobCounts();
  expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(0);
}

it.skipIf(!CHROMIUM.available)('a cross-site page (logged-in operator) cannot replay, bulk re-drive or add a job: 403 each, nothing changes', async () => {
  const admin = ingest.url; // http://127.0.0.1:PORT
  pages.set('/replay', jsonShapedForm(`${admin}/admin/api/events/${failedId}/replay`, { all_steps: true, reason: 'csrf' }));
  pages.set('/bulk', jsonShapedForm(`${admin}/admin/api/redrive`, { state: 'failed', dry_run: false, reason: 'csrf' }));
  pages.set('/add-job', jsonShapedForm(`${admin}/admin/queues/api/queues/webhook-events/add`, { data: { rowId: failedId }, name: 'evil' }));
  pages.set(
    '/fetch',
    `<!doctype html><script>
      const body = JSON.stringify({ reason: 'csrf' });
      fetch('${admin}/admin/api/events/${failedId}/replay', { method: 'POST', mode: 'no-cors', credentials: 'include', body });
      fetch('${admin}/admin/api/events/${failedId}/redrive', { method: 'POST', mode: 'no-cors', credentials: 'include', body: new Blob([body]) });
      // (no-cors allows only GET/HEAD/POST: Bull Board's PUT actions cannot be sent at all)
      fetch('${admin}/admin/queues/api/queues/webhook-events/add', { method: 'POST', mode: 'no-cors', credentials: 'include', body: JSON.stringify({ name: 'evil', data: {} }) });
    </script>`,
  );

  // The operator is logged in: the browser answers the admin's basic-auth challenge.
  const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD } });
  // Another site: `localhost` is not `127.0.0.1` (Sec-Fetch-Site: cross-site).
  const crossSite = `http://localhost:${evilPort}`;
  expect(await attack(context, `${crossSite}/replay`, 1)).toEqual([403]);
  expect(await attack(context, `${crossSite}/bulk`, 1)).toEqual([403]);
  expect(await attack(context, `${crossSite}/add-job`, 1)).toEqual([403]);
  expect((await attack(context, `${crossSite}/fetch`, 3)).sort()).toEqual([403, 403, 403]);
  // Same site, other origin (another port of the same host): refused too.
  expect(await attack(context, `http://127.0.0.1:${evilPort}/replay`, 1)).toEqual([403]);
  await nothingChanged();

  // The admin's pages cannot be framed by the hostile site either.
  const page = await context.newPage();
  const events = await page.goto(`${admin}/admin/events`);
  expect(events?.headers()['x-frame-options']).toBe('DENY');
  expect(events?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
  await page.close();
  await context.close();
});

it('without browser headers (an old browser, a script): a text/plain or typeless body is refused with 415, a foreign Origin with 403', async () => {
  const basic = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
  const url = `${ingest.url}/admin/api/events/${failedId}/replay`;
  const body = '{"reason":"csrf"}';
  const plain = await fetch(url, { method: 'POST', headers: { authorization: basic, 'content-type': 'text/plain' }, body });
  expect(plain.status).toBe(415);
  const typeless = await fetch(url, { method: 'POST', headers: { authorization: basic }, body: new Blob([body]) });
  expect(typeless.status).toBe(415);
  const foreign = await fetch(url, { method: 'POST', headers: { authorization: basic, 'content-type': 'application/json', origin: 'https://evil.example' }, body });
  expect(foreign.status).toBe(403);
  expect(await foreign.json()).toMatchObject({ error: 'cross_site_request' });
  await nothingChanged();
});

it.skipIf(!CHROMIUM.available)('the same replay from the admin’s own page works (and a script with the token too)', async () => {
  const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD } });
  const page = await context.newPage();
  await page.goto(`${ingest.url}/admin/events/${failedId}`);
  const status = await page.evaluate(async (id) => {
    const response = await fetch(`/admin/api/events/${id}/replay`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'operator replay', all_steps: true }),
    });
    return response.status;
  }, failedId);
  expect(status).toBe(200);
  const actions = await db.pool.query<{ actor: string; reason: string }>(`SELECT actor, reason FROM ${T.actions}`);
  expect(actions.rows).toEqual([{ actor: expect.stringContaining(USER), reason: 'operator replay' }]);
  await context.close();

  const scripted = await fetch(`${ingest.url}/admin/api/redrive`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ state: 'failed', dry_run: true }),
  });
  expect(scripted.status).toBe(200);
});
