/**
 * No secret anywhere it should not be (issue 63, item 3): a canary in every secret slot (the
 * providers' signing secrets, the admin's password and token, METRICS_TOKEN, a destination's
 * signing secret and custom headers, FAILURE_NOTIFY_SECRET, the backfill API keys), then the
 * attacks of this round against a real ingest and worker: forged deliveries and wrong logins; a
 * destination that redirects to another origin, echoes its request's headers in a 400 and in a
 * 503; a header value with a line break; a failure notification; provider APIs that send the
 * listing elsewhere or echo the key in their error. Then every log line, every database row,
 * every admin page, every CLI output, every notification and every request another origin
 * received is searched for each canary, raw and base64 at every alignment: none is there.
 *
 * (The receiver a destination is configured for, and the provider APIs, receive their keys: that
 * is their purpose, so what they receive is not searched.)
 */
import { loadDestinations } from '@oncehook/core';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deliver, paymentSucceeded, signStripe } from '@oncehook/harness';
import { createWorkerMetrics } from '@oncehook/shared';
import { createStripeSource } from '@oncehook/providers';
import { defineHandler } from '@oncehook/sdk';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCliHere } from './helpers/cli-here.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, startIngest, startWorker, testEnv, testPrefix } from './helpers/stack.js';

/** A canary: letters and digits only (every slot's format takes them), unique to its slot. */
const canary = (slot: string) => `cnry${slot}${randomBytes(12).toString('hex')}`;
const C = {
  stripeSigning: canary('stripesigning'),
  adminPassword: canary('adminpassword'),
  adminToken: canary('admintoken'),
  metricsToken: canary('metricstoken'),
  destinationSecret: canary('destinationsecret'),
  headerInline: canary('headerinline'),
  headerEnv: canary('headerenv'),
  headerBroken: canary('headerbroken'),
  notifySecret: canary('notifysecret'),
  stripeKey: canary('stripekey'),
  paddleKey: canary('paddlekey'),
  githubToken: canary('githubtoken'),
};
const whsec = (text: string) => `whsec_${Buffer.from(text).toString('base64')}`;

/** Every way a canary could show: raw, and base64 at each of the three alignments (the stable middle of each). */
function forms(secret: string): string[] {
  const out = [secret];
  for (let k = 0; k < 3; k += 1) {
    const encoded = Buffer.concat([Buffer.alloc(k), Buffer.from(secret)]).toString('base64');
    out.push(encoded.slice(Math.ceil(k / 3) * 4, encoded.length - 4));
  }
  return out;
}

/** Where each found canary was, or [] (what a test asserts). */
function leaks(where: string, text: string): string[] {
  const found: string[] = [];
  for (const [slot, secret] of Object.entries(C)) for (const form of forms(secret)) if (text.includes(form)) found.push(`${slot} in ${where}`);
  return found;
}

interface Recorder {
  url: string;
  seen: string[];
  close(): Promise<void>;
}

async function recorder(answer: (req: IncomingMessage, res: ServerResponse, body: string, n: number) => void): Promise<Recorder> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      seen.push(`${req.method} ${req.url}\n${JSON.stringify(req.headers)}\n${body}`);
      answer(req, res, body, seen.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let db: TestDatabase;
const logs: string[] = [];
const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
const outputs: [string, string][] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await db.drop();
});

it('a canary in every secret slot is found nowhere after every attack: logs, rows, admin pages, CLI output, notifications, other origins', { timeout: 120_000 }, async () => {
  const prefix = testPrefix();
  // Another origin that a redirect and a pagination link point to: nothing may reach it.
  const elsewhere = await recorder((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[],"meta":{"pagination":{"next":null,"has_more":false}}}'),
  );
  // The destination's service: a redirect elsewhere, then its request's headers echoed in a 400, then in 503s.
  const service = await recorder((req, res, _body, n) => {
    if (n === 1) return res.writeHead(307, { location: `${elsewhere.url}/moved` }).end();
    res.writeHead(n === 2 ? 400 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'rejected', youSent: req.headers }));
  });
  const notifications = await recorder((_req, res) => res.writeHead(204).end());
  closers.push(elsewhere.close, service.close, notifications.close);

  // The destination, from a file with an inline header and one from the environment.
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-canary-'));
  closers.push(() => rm(dir, { recursive: true, force: true }));
  const destinationsFile = path.join(dir, 'destinations.json');
  await writeFile(
    destinationsFile,
    JSON.stringify({
      destinations: [
        {
          name: 'crm',
          url: `${service.url}/hooks`,
          secretEnv: 'CRM_SECRET',
          followRedirects: true,
          headers: { 'X-Api-Key': C.headerInline },
          headersEnv: { Authorization: 'CRM_AUTH' },
        },
      ],
    }),
  );
  const destinationEnv = { ONCEHOOK_DESTINATIONS_FILE: destinationsFile, CRM_SECRET: whsec(C.destinationSecret), CRM_AUTH: `Bearer ${C.headerEnv}` };
  const common = {
    STRIPE_WEBHOOK_SECRET: `whsec_${C.stripeSigning}`,
    ADMIN_USERNAME: 'operator',
    ADMIN_PASSWORD: C.adminPassword,
    ADMIN_TOKEN: C.adminToken,
    METRICS_TOKEN: C.metricsToken,
    FAILURE_NOTIFY_URL: `${notifications.url}/failures`,
    FAILURE_NOTIFY_SECRET: whsec(C.notifySecret),
    ...destinationEnv,
  };
  const ingest: IngestHandle = await startIngest({
    databaseUrl: db.url,
    prefix,
    env: common,
    log,
    destinations: loadDestinations(destinationEnv),
    sources: new Map([['stripe', createStripeSource({ secrets: [`whsec_${C.stripeSigning}`], toleranceSeconds: 300 })]]),
  });
  closers.push(() => ingest.close());
  const sign = (event: Record<string, unknown>) => signStripe(event, { secret: `whsec_${C.stripeSigning}` });
  const noop = defineHandler({ name: 'records', source: 'stripe', type: 'payment_intent.succeeded' }, async () => {});
  const worker = await startWorker({
    databaseUrl: db.url,
    prefix,
    handlers: [noop],
    destinations: loadDestinations(destinationEnv),
    env: { ...common, MAX_ATTEMPTS: '2', RETRY_BACKOFF_MS: '10' },
    log,
    metrics: createWorkerMetrics({ defaultMetrics: false }),
  });
  closers.push(() => worker.close());

  // Deliveries: three real ones (the destination's three answers), a duplicate, forgeries.
  for (const id of ['evt_canary_1', 'evt_canary_2', 'evt_canary_3']) expect((await deliver(ingest.url, sign(paymentSucceeded(id)))).status).toBe(202);
  expect((await deliver(ingest.url, sign(paymentSucceeded('evt_canary_1')))).status).toBe(200);
  expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_forged'), { secret: 'whsec_wrong' }))).status).toBe(401);
  // Wrong admin logins and wrong metrics tokens.
  for (const password of ['hunter2-hunter2', `${C.adminPassword.slice(0, 8)}nope`])
    await fetch(`${ingest.url}/admin/events`, { headers: { authorization: `Basic ${Buffer.from(`operator:${password}`).toString('base64')}` } });
  await fetch(`${ingest.url}/metrics`, { headers: { authorization: 'Bearer not-the-metrics-token' } });

  // The runs: one through the redirect, one dead letter (400), one failing twice (503).
  const until = async (check: () => Promise<boolean>) => {
    for (let i = 0; i < 200 && !(await check()); i += 1) await new Promise((resolve) => setTimeout(resolve, 100));
  };
  await until(
    async () => (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM oncehook.handler_runs WHERE handler = 'crm' AND state IN ('done', 'failed')`)).rows[0]!.n === 3,
  );
  expect(elsewhere.seen).toHaveLength(1); // the redirect, without the headers (searched below)
  // The reconciler opens the failure groups and notifies them.
  await worker.eventWorker.reconciler.runOnce();
  await worker.eventWorker.reconciler.notifier?.idle();
  expect(notifications.seen.length).toBeGreaterThanOrEqual(1);

  // A header value with a line break: refused at configuration, the message naming the field.
  await writeFile(
    path.join(dir, 'broken.json'),
    JSON.stringify({ destinations: [{ name: 'broken', url: 'https://crm.internal/h', secretEnv: 'S', headers: { 'X-Api-Key': `${C.headerBroken}\r\nX-Injected: 1` } }] }),
  );
  let configError = '';
  try {
    loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: path.join(dir, 'broken.json'), S: whsec(C.destinationSecret) });
  } catch (error) {
    configError = `${(error as Error).message}\n${(error as Error).stack}`;
  }
  expect(configError).toMatch(/headers\.X-Api-Key: the value contains a line break/);
  outputs.push(['the configuration error', configError]);

  // Provider APIs for backfill: Paddle's next link elsewhere, Stripe and GitHub echoing the key in their 401.
  const paddle = await recorder((_req, res) =>
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ data: [], meta: { pagination: { next: `${elsewhere.url}/notifications?after=x`, has_more: true } } })),
  );
  const stripe = await recorder((req, res) =>
    res
      .writeHead(401, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { type: 'invalid_request_error', message: `Invalid API Key provided: ${String(req.headers.authorization)}` } })),
  );
  const github = await recorder((req, res) =>
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ message: `Bad credentials ${String(req.headers.authorization)}` })),
  );
  closers.push(paddle.close, stripe.close, github.close);
  const cliEnv = {
    ...testEnv({ databaseUrl: db.url, prefix }),
    ...common,
    PADDLE_WEBHOOK_SECRET: 'pdl_ntfset_canarycheck_0123456789abcdef',
    GITHUB_WEBHOOK_SECRET: 'github-canary-check-secret-0123',
    STRIPE_API_KEY: `rk_test_${C.stripeKey}`,
    STRIPE_API_BASE: stripe.url,
    PADDLE_API_KEY: `pdl_sdbx_apikey_${C.paddleKey}`,
    PADDLE_API_BASE: paddle.url,
    GITHUB_API_TOKEN: `ghp_${C.githubToken}`,
    GITHUB_API_BASE: github.url,
    GITHUB_BACKFILL_HOOK: 'acme/shop/1',
  };
  const before = elsewhere.seen.length;
  for (const args of [
    ['backfill', 'paddle', '--since', '24h'],
    ['backfill', 'stripe', '--since', '24h'],
    ['backfill', 'github', '--since', '24h'],
    ['list', '--state', 'failed'],
    ['list', '--destination', 'crm'],
    ['show', 'stripe/evt_canary_2'],
    ['failures'],
    ['destinations'],
    ['paused'],
  ]) {
    const result = await runCliHere(args, cliEnv);
    outputs.push([`oncehook ${args.join(' ')}`, result.output]);
  }
  expect(outputs.find(([what]) => what.includes('backfill paddle'))![1]).toMatch(/not its own origin/);
  expect(outputs.find(([what]) => what.includes('backfill stripe'))![1]).toMatch(/backfill failed: Stripe's API answered 401/);
  expect(elsewhere.seen.length).toBe(before);

  // The admin's pages and API, /metrics, with the right credentials.
  const auth = { authorization: `Bearer ${C.adminToken}` };
  const { rows: events } = await db.pool.query<{ id: number }>(`SELECT id FROM oncehook.events ORDER BY id`);
  const pages = [
    '/admin/events',
    '/admin/events?state=failed',
    '/admin/failures',
    '/admin/destinations',
    '/admin/handlers',
    '/admin/handlers/crm',
    '/admin/pauses',
    '/admin/activity',
    '/admin/api/events?limit=100',
    '/admin/api/failure-groups',
    '/admin/api/destinations',
    ...events.flatMap((e) => [`/admin/events/${e.id}`, `/admin/api/events/${e.id}`]),
  ];
  for (const page of pages) {
    const response = await fetch(`${ingest.url}${page}`, { headers: auth });
    outputs.push([`GET ${page} (${response.status})`, await response.text()]);
  }
  outputs.push(['ingest /metrics', await (await fetch(`${ingest.url}/metrics`, { headers: { authorization: `Bearer ${C.metricsToken}` } })).text()]);
  outputs.push(['worker metrics', await worker.metrics.registry.metrics()]);

  // Every row of every table of the database, as text.
  const { rows: tables } = await db.pool.query<{ name: string }>(
    `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`,
  );
  let rowsText = '';
  for (const { name } of tables) {
    const { rows } = await db.pool.query<{ t: string }>(`SELECT t::text AS t FROM ${name} t`);
    rowsText += rows.map((r) => r.t).join('\n');
  }
  expect(rowsText).toContain('evt_canary_2'); // the rows are really there

  const found = [
    ...leaks('the logs', logs.join('\n')),
    ...leaks('the database', rowsText),
    ...outputs.flatMap(([where, text]) => leaks(where, text)),
    ...leaks('the failure notifications', notifications.seen.join('\n')),
    ...leaks('requests another origin received', elsewhere.seen.join('\n')),
  ];
  expect(found).toEqual([]);
  // The searches look where the canaries would be: the echoing service's answers were recorded (redacted).
  expect(rowsText).toMatch(/\[redacted\]/);
  expect(logs.some((l) => l.includes('admin login failed'))).toBe(true);
});
