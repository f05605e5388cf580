/**
 * A user's own handler, outside apps/, packages/ and examples/, loaded by ONCEHOOK_HANDLERS,
 * with the example shop NOT loaded: docs/handlers.md's walkthrough ("your first handler")
 * followed from the page's own text: its module and its migration written to my-handlers/ at
 * run time, its `npm run migrate -- ...` line run as written (through the oncehook command),
 * the variables its `npm start` line sets given to real ingest and worker processes, and the
 * payload `npm run send -- stripe charge.refunded` sends (the testkit's fixture) delivered.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { killAllServices, ROOT, signStripe, nodeArgsFor, spawnService, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { fixture } from '@oncehook/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { docBlock, docCodeBlock, docCommand } from './helpers/docs.js';
import { ingestUrl, onlyRun, q, testEnv, testPrefix } from './helpers/stack.js';

const run = promisify(execFile);
const MODULE_DIR = path.join(ROOT, 'my-handlers');

let db: TestDatabase;
let sandbox: SandboxHandle;
let frameworkBefore: string;

/** What git sees under apps/ and packages/: status, and the content of every change. */
async function frameworkState(): Promise<string> {
  const status = await run('git', ['status', '--porcelain', '--untracked-files=all', '--', 'apps', 'packages'], { cwd: ROOT });
  const diff = await run('git', ['diff', 'HEAD', '--', 'apps', 'packages'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
  return `${status.stdout}\n${diff.stdout}`;
}

beforeAll(async () => {
  frameworkBefore = await frameworkState();
  db = await createTestDatabase();
  sandbox = await startSandbox();
  await mkdir(MODULE_DIR, { recursive: true });
  await writeFile(path.join(MODULE_DIR, 'refunds.ts'), await docCodeBlock('docs/handlers.md', 'my-handlers/refunds.ts'));
  // The user's own table: the page's migration, applied by the page's command.
  await mkdir(path.join(MODULE_DIR, 'migrations'), { recursive: true });
  await writeFile(path.join(MODULE_DIR, 'migrations/0001_accounts.sql'), await docBlock('docs/handlers.md', 'sql', '-- my-handlers/migrations/0001_accounts.sql'));
  const migrateLine = await docCommand('docs/handlers.md', 'npm run migrate -- ');
  const args = migrateLine.slice('npm run migrate -- '.length).split(/\s+/);
  const migrated = await run(process.execPath, [...nodeArgsFor('packages/oncehook/src/cli/entry.ts'), 'migrate', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: db.url },
  });
  expect(migrated.stdout).toMatch(/refunds\/0001_accounts\.sql/);
});
afterAll(async () => {
  await killAllServices();
  await rm(MODULE_DIR, { recursive: true, force: true });
  await sandbox.close();
  await db.drop();
});

function chargeRefunded(eventId: string) {
  return {
    id: eventId,
    object: 'event',
    type: 'charge.refunded',
    created: Math.floor(Date.now() / 1000),
    data: {
      object: { id: 'ch_refund_1', object: 'charge', amount: 5000, amount_refunded: 1500, currency: 'usd', customer: 'cus_refund', billing_details: { email: 'ada@example.com' } },
    },
  };
}

it('a charge.refunded delivered 5 times at once: one email call, one debit; the example is not loaded; nothing under apps/ or packages/ changed', async () => {
  const prefix = testPrefix();
  // The variables the page's `npm start` line sets (the sandbox's URL here is this test's own).
  const startLine = await docCommand('docs/handlers.md', /npm start$/);
  const startVars = Object.fromEntries([...startLine.matchAll(/([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
  expect(Object.keys(startVars).sort()).toEqual(['ONCEHOOK_HANDLERS', 'REFUNDS_EMAIL_API_URL']);
  expect(startVars.REFUNDS_EMAIL_API_URL).toBe('http://127.0.0.1:4010/email'); // the sandbox's under npm start
  const env = testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_HANDLERS: startVars.ONCEHOOK_HANDLERS!, REFUNDS_EMAIL_API_URL: `${sandbox.url}/email` } });
  const ingest = spawnService('ingest', env);
  const worker = spawnService('worker', env);
  const url = await ingestUrl(ingest);
  await worker.waitFor(/worker ready/);
  expect(worker.lines.join('\n')).toMatch(/"source":"stripe","type":"charge.refunded","handler":"refunds".*"msg":"handler loaded"/);
  expect(worker.lines.join('\n')).toMatch(/worker loaded 1 handler\(s\) from my-handlers\/refunds.ts/);
  expect(worker.lines.join('\n')).not.toMatch(/shop\./);

  const event = chargeRefunded('evt_refund_1');
  const now = Math.floor(Date.now() / 1000);
  const answers = await Promise.all(
    Array.from({ length: 5 }, (_, i) => fetch(`${url}/webhooks/stripe`, { method: 'POST', ...signStripe(event, { timestamp: now - i }) }).then((r) => r.status)),
  );
  expect(answers.sort()).toEqual([200, 200, 200, 200, 202]);

  const found = await waitFor(
    async () => {
      const f = await onlyRun(db.pool, 'stripe', 'evt_refund_1').catch(() => null);
      return f?.event.state === 'done' ? f : null;
    },
    { what: 'refund done' },
  );
  expect(found.run).toMatchObject({ handler: 'refunds', state: 'done', attempts: 1 });
  expect(sandbox.stats().email.requests).toBe(1); // one email call
  expect(sandbox.stats().email.effects).toEqual([expect.objectContaining({ to: 'ada@example.com', subject: 'Your refund' })]);
  expect((await db.pool.query('SELECT id, balance_cents::int AS balance FROM accounts')).rows).toEqual([{ id: 'cus_refund', balance: -1500 }]); // one debit

  // What `npm run send -- stripe charge.refunded` sends: the built-in payload (no customer, a
  // billing_details without an email) ends done, with one email to the handler's fallback.
  const sent = fixture('stripe', 'charge.refunded') as { id: string };
  expect((await fetch(`${url}/webhooks/stripe`, { method: 'POST', ...signStripe(sent) })).status).toBe(202);
  const fromFixture = await waitFor(
    async () => {
      const f = await onlyRun(db.pool, 'stripe', sent.id).catch(() => null);
      return f && (f.run.state === 'done' || f.run.state === 'failed' || f.run.attempts > 1) ? f : null;
    },
    { what: 'the built-in charge.refunded handled' },
  );
  expect(fromFixture.run).toMatchObject({ state: 'done', attempts: 1 });
  expect(sandbox.stats().email.effects).toEqual([
    expect.objectContaining({ to: 'ada@example.com' }),
    expect.objectContaining({ to: 'billing@example.com', subject: 'Your refund' }),
  ]);

  // An event of the example's is not handled here: the example is not loaded.
  const payment = {
    id: 'evt_not_mine',
    object: 'event',
    type: 'payment_intent.succeeded',
    created: now,
    data: { object: { id: 'pi_1', amount: 100, amount_received: 100, currency: 'usd' } },
  };
  expect((await fetch(`${url}/webhooks/stripe`, { method: 'POST', ...signStripe(payment) })).status).toBe(202);
  const unhandled = await waitFor(
    async () => {
      const e = await q.getEventByKey(db.pool, 'stripe', 'evt_not_mine');
      return e?.state === 'done' ? e : null;
    },
    { what: 'unhandled event recorded' },
  );
  expect(unhandled.note).toMatch(/no handler registered/);
  expect((await q.getRuns(db.pool, unhandled.id)).length).toBe(0);

  // Adding the handler touched no framework file (on a clean checkout, git status is empty there).
  expect(await frameworkState()).toBe(frameworkBefore);
});
