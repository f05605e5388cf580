/**
 * Oncehook used from a team's own project, the way they install it (issue 22): every public
 * package is built and packed; a project in a temporary folder OUTSIDE this repository, with
 * its own package.json, installs only those tarballs and ordinary registry packages (no
 * workspace link, nothing read from this repository's sources), and then:
 *
 * - the packages pass the ecosystem's package linters (publint; arethetypeswrong, ESM only);
 * - its handler type-checks with `strict` and `NodeNext`, without skipLibCheck, with the
 *   `stripe` types installed and no `@octokit/webhooks` (a Stripe-only project);
 * - `oncehook migrate` applies its own migration, `oncehook ingest` and `oncehook worker
 *   --handlers ./src/webhooks` run its handler, compiled JavaScript under plain node;
 * - five concurrent signed deliveries of one refund: one row in its table, one call to its API;
 * - its API answering 422: a dead letter at attempt 1, although the handler module resolves its
 *   OWN copy of @oncehook/sdk (a second copy beside the worker's: the error is recognised by
 *   its brand, not its class);
 * - its own vitest test, with the testkit's checkHandler, passes.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createEmptyDatabase, PG_BASE_URL, REDIS_URL, ROOT, SOURCE_NODE_ARGS, waitFor } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import Stripe from 'stripe';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const PACKAGES = ['sdk', 'shared', 'core', 'oncehook', 'testkit'];
const SECRET = 'whsec_user_project_secret_for_the_test';
const stripe = new Stripe('sk_test_unused');

let dir: string;
const tarballs: Record<string, string> = {};
let dropDatabase: (() => Promise<void>) | undefined;
const children: ChildProcess[] = [];

/** The project's fake notification API: records each call by idempotency key; 422 for charge ch_bad. */
const calls: { key: string | null; charge: string }[] = [];
let api: Server;
let apiUrl: string;

beforeAll(async () => {
  api = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { charge } = JSON.parse(body || '{}') as { charge: string };
      calls.push({ key: (req.headers['idempotency-key'] as string | undefined) ?? null, charge });
      if (charge === 'ch_bad') return res.writeHead(422, { 'content-type': 'application/json' }).end('{"error":"charge unknown to us"}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `ntf_${charge}` }));
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as { port: number }).port}`;
  dir = await mkdtemp(path.join(tmpdir(), 'oncehook-user-project-'));
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  api?.close();
  await dropDatabase?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function spawnIn(cwd: string, args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  return { child, output: () => out };
}

const FILES: Record<string, string> = {
  'tsconfig.json': JSON.stringify({
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      skipLibCheck: false,
      noEmit: true,
      types: ['node'],
      allowImportingTsExtensions: false,
    },
    include: ['src', 'test'],
  }),
  'migrations/0001_refunds.sql': `create table refunds (charge_id text primary key, amount_refunded integer not null, notification text);\n`,
  // The handler: its own table (a local step), its own API (an external step with the key).
  'src/webhooks/refunds.ts': `import { createOutboundClient, defineHandler, readSettings } from '@oncehook/sdk';
import '@oncehook/sdk/stripe';
import { z } from 'zod';

const settings = readSettings({ NOTIFY_API_URL: z.string().url() });
const notifications = createOutboundClient({ name: 'notify', baseUrl: settings.NOTIFY_API_URL, maxTries: 2, baseDelayMs: 10 });

export default defineHandler({ name: 'refunds', source: 'stripe', type: 'charge.refunded' }, async (event, ctx) => {
  const charge = event.payload.data.object;
  const refunded: number = charge.amount_refunded;
  await ctx.transaction('record-refund', async (tx) => {
    await tx.query('INSERT INTO refunds (charge_id, amount_refunded) VALUES ($1, $2) ON CONFLICT (charge_id) DO NOTHING', [charge.id, refunded]);
    return { charge: charge.id };
  });
  const sent = await ctx.step('notify', async ({ idempotencyKey }) => {
    const response = await notifications.request<{ id: string }>({ method: 'POST', path: '/notifications', body: { charge: charge.id }, idempotencyKey });
    return { notification: response.body.id };
  });
  await ctx.transaction('remember', async (tx) => {
    await tx.query('UPDATE refunds SET notification = $2 WHERE charge_id = $1', [charge.id, sent.notification]);
    return { done: true };
  }, { final: true });
});
`,
  // The project's own test of it, with the test kit.
  'test/refunds.test.ts': `import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { checkHandler } from '@oncehook/testkit';
import { expect, it } from 'vitest';

it('refunds survives duplicates and a crash at every step boundary', async () => {
  const seen = new Map<string, string>();
  const server = createServer((req, res) => {
    const key = String(req.headers['idempotency-key']);
    if (!seen.has(key)) seen.set(key, 'ntf_' + seen.size);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: seen.get(key) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  process.env.NOTIFY_API_URL = 'http://127.0.0.1:' + (server.address() as { port: number }).port;
  const { default: refunds } = await import('../src/webhooks/refunds.js');
  const migration = await readFile(new URL('../migrations/0001_refunds.sql', import.meta.url), 'utf8');
  const report = await checkHandler(
    refunds,
    { type: 'charge.refunded', payload: { id: 'evt_check', object: 'event', type: 'charge.refunded', data: { object: { id: 'ch_check', amount_refunded: 500 } } } },
    { setup: (db) => db.query(migration), state: async (db) => (await db.query('SELECT charge_id, amount_refunded, notification FROM refunds')).rows },
  );
  server.close();
  expect(report.problems).toEqual([]);
}, 120_000);
`,
};

it('a project of its own: installs the packed packages, type-checks, migrates, runs its handler exactly once, dead-letters a 422 at once, and its own testkit test passes', {
  timeout: 600_000,
}, async () => {
  // 1. Build and pack every public package (compiled JavaScript, .d.ts, no private dependency).
  const built = await run(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/build.ts'], { cwd: ROOT, maxBuffer: 20 * 1024 * 1024 });
  expect(built.stdout).toContain('build: done');
  const packs = path.join(dir, 'packs');
  await mkdir(packs, { recursive: true });
  for (const name of PACKAGES) {
    const { stdout } = await run('npm', ['pack', '--pack-destination', packs, '--silent'], { cwd: path.join(ROOT, 'packages', name) });
    tarballs[name] = path.join(packs, stdout.trim().split('\n').pop()!);
  }
  expect((await readdir(packs)).sort()).toHaveLength(PACKAGES.length);

  // 2. The ecosystem's package linters, on what would be published.
  for (const name of PACKAGES) {
    const lint = await run(process.execPath, [path.join(ROOT, 'node_modules/publint/src/cli.js'), path.join(ROOT, 'packages', name)], { cwd: ROOT });
    expect(lint.stdout, `publint ${name}`).toContain('All good!');
    const types = await run(process.execPath, [path.join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarballs[name]!, '--profile', 'esm-only', '--format', 'json'], {
      cwd: ROOT,
      maxBuffer: 20 * 1024 * 1024,
    }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '', failed: true }));
    expect('failed' in types, `attw ${name}: ${types.stdout.slice(0, 2000)}`).toBe(false);
  }

  // 3. The project: its package.json names the tarballs and registry packages only.
  const project = path.join(dir, 'acme-billing');
  for (const [file, text] of Object.entries(FILES)) {
    await mkdir(path.dirname(path.join(project, file)), { recursive: true });
    await writeFile(path.join(project, file), text);
  }
  const file = (name: string) => `file:${tarballs[name]}`;
  await writeFile(
    path.join(project, 'package.json'),
    JSON.stringify(
      {
        name: 'acme-billing',
        private: true,
        type: 'module',
        scripts: { test: 'vitest run' },
        dependencies: { oncehook: file('oncehook'), '@oncehook/sdk': file('sdk'), zod: '^4.6.7' },
        devDependencies: { '@oncehook/testkit': file('testkit'), '@types/node': '^20.19.43', stripe: '^23.1.0', typescript: '~5.9.3', vitest: '~4.1.12' },
        // The engine's own packages, from their tarballs too (a registry would serve them).
        overrides: { '@oncehook/core': file('core'), '@oncehook/shared': file('shared'), '@oncehook/sdk': file('sdk'), '@oncehook/testkit': file('testkit') },
      },
      null,
      2,
    ),
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: project, maxBuffer: 20 * 1024 * 1024, timeout: 300_000 });
  const installed = await readdir(path.join(project, 'node_modules/@oncehook'));
  expect(installed.sort()).toEqual(['core', 'sdk', 'shared', 'testkit']);
  await expect(readdir(path.join(project, 'node_modules/@octokit'))).rejects.toThrow(); // a Stripe-only project

  // The handler module resolves its OWN copy of the SDK: another physical copy, beside it.
  const ownSdk = path.join(project, 'src/webhooks/node_modules/@oncehook/sdk');
  await mkdir(ownSdk, { recursive: true });
  await run('tar', ['xzf', tarballs.sdk!, '-C', ownSdk, '--strip-components=1']);

  // 4. Type-check: strict, NodeNext, no skipLibCheck.
  const tsc = await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'], { cwd: project }).catch((error: { stdout: string }) => ({
    stdout: error.stdout,
    failed: true,
  }));
  expect('failed' in tsc, tsc.stdout).toBe(false);

  // 5. The command, compiled, under plain node: migrate, ingest, worker.
  const database = await createEmptyDatabase(undefined, 'oncehook_user');
  dropDatabase = database.drop;
  const bin = 'node_modules/oncehook/bin/oncehook.js';
  const env = { DATABASE_URL: database.url, REDIS_URL, QUEUE_PREFIX: `user-${Date.now() % 1_000_000}`, STRIPE_WEBHOOK_SECRET: SECRET, NOTIFY_API_URL: apiUrl, LOG_LEVEL: 'info' };
  const migrate = await run(process.execPath, [bin, 'migrate', '--dir', './migrations', '--set', 'refunds'], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
  });
  expect(migrate.stdout).toMatch(/applied 10 migration\(s\): .*refunds\/0001_refunds\.sql/);
  const ingest = spawnIn(project, [bin, 'ingest'], { ...env, PORT: '0', HOST: '127.0.0.1' });
  const worker = spawnIn(project, [bin, 'worker', '--handlers', './src/webhooks'], { ...env, METRICS_PORT: '0', RETRY_BACKOFF_MS: '20' });
  await waitFor(() => (/ingest listening on \d+/.test(ingest.output()) && worker.output().includes('worker ready')) || null, {
    timeoutMs: 60_000,
    what: `ingest and worker ready:\n${ingest.output()}\n${worker.output()}`,
  });
  expect(worker.output()).toContain('worker loaded 1 handler(s) from src/webhooks/refunds.ts');
  const url = `http://127.0.0.1:${/ingest listening on (\d+)/.exec(ingest.output())?.[1]}`;
  const deliver = (id: string, charge: string) => {
    const payload = JSON.stringify({
      id,
      object: 'event',
      type: 'charge.refunded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: charge, amount_refunded: 700 } },
    });
    const signature = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET });
    return fetch(`${url}/webhooks/stripe`, { method: 'POST', body: payload, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
  };

  // 6. Five concurrent deliveries of one refund: one row, one call.
  const answers = await Promise.all(Array.from({ length: 5 }, () => deliver('evt_refund_1', 'ch_1')));
  expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 202]);
  // 7. Its API refusing a refund (422): a PermanentError from the handler's own SDK copy.
  expect((await deliver('evt_refund_bad', 'ch_bad')).status).toBe(202);

  const pool = createPool(database.url, { max: 1 });
  try {
    const runs = await waitFor(
      async () => {
        const { rows } = await pool.query<{ event_id: string; state: string; attempts: number; last_error: string | null }>(
          `SELECT e.event_id, r.state, r.attempts, r.last_error FROM oncehook.handler_runs r JOIN oncehook.events e ON e.id = r.event_row_id
            WHERE r.state IN ('done', 'failed') ORDER BY e.event_id`,
        );
        return rows.length === 2 ? rows : null;
      },
      { timeoutMs: 30_000, what: `both runs finished:\n${worker.output().slice(-3000)}` },
    );
    expect(runs).toEqual([
      { event_id: 'evt_refund_1', state: 'done', attempts: 1, last_error: null },
      { event_id: 'evt_refund_bad', state: 'failed', attempts: 1, last_error: expect.stringMatching(/PermanentError: .*422/) },
    ]);
    const { rows } = await pool.query('SELECT charge_id, amount_refunded, notification FROM refunds ORDER BY charge_id');
    expect(rows).toEqual([
      { charge_id: 'ch_1', amount_refunded: 700, notification: 'ntf_ch_1' },
      { charge_id: 'ch_bad', amount_refunded: 700, notification: null },
    ]);
    expect(calls.filter((c) => c.charge === 'ch_1')).toHaveLength(1);
    expect(calls.filter((c) => c.charge === 'ch_bad')).toHaveLength(1); // a 422 is not retried
    expect(calls.every((c) => c.key !== null)).toBe(true);
    // The worker counted the calls the handler's own SDK copy made (one observer registry for
    // every copy): webhook_outbound_calls_total{api="notify"}.
    const metricsPort = /worker metrics on (\d+)/.exec(worker.output())?.[1];
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/webhook_outbound_calls_total\{api="notify",outcome="ok"\} 1/);
    expect(metrics).toMatch(/webhook_outbound_calls_total\{api="notify",outcome="permanent"\} 1/);
  } finally {
    await pool.end();
  }
  ingest.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');

  // 8. Its own test, with the test kit, run by its own vitest.
  const own = await run(process.execPath, ['node_modules/vitest/vitest.mjs', 'run'], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ONCEHOOK_CHECK_DATABASE_URL: `${PG_BASE_URL}/postgres` },
    maxBuffer: 20 * 1024 * 1024,
    timeout: 300_000,
  }).catch((error: { stdout: string; stderr: string }) => ({ stdout: error.stdout + error.stderr, failed: true }));
  expect('failed' in own, own.stdout.slice(-3000)).toBe(false);
  expect(own.stdout).toMatch(/1 passed/);
});
