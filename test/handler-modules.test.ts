/**
 * A user's own handler, outside apps/, packages/ and examples/, loaded by ONCEHOOK_HANDLERS,
 * with the example shop NOT loaded: the module docs/handlers.md shows ("your first handler"),
 * written to my-handlers/refunds.ts at run time and run by real ingest and worker processes.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { killAllServices, ROOT, signStripe, spawnService, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { docCodeBlock } from './helpers/docs.js';
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
  // The user's own table (their migrations would create it).
  await db.pool.query('CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL)');
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
  const env = testEnv({ databaseUrl: db.url, prefix, extra: { ONCEHOOK_HANDLERS: 'my-handlers/refunds.ts', REFUNDS_EMAIL_API_URL: `${sandbox.url}/email` } });
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
