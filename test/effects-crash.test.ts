/**
 * kill -9 of the worker right after an external call returned and before its step was
 * recorded: the resumed attempt re-sends with the same key and the API applies nothing new.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { shopifyOrder } from './helpers/orders.js';
import { killAllServices, spawnService } from '@oncehook/harness';
import { allSources, send } from '@oncehook/harness';
import { startSandbox, type SandboxHandle } from '@oncehook/harness';
import { type IngestHandle, testEnv, startIngest, testPrefix, onlyRun } from './helpers/stack.js';
import { waitFor } from '@oncehook/harness';

let db: TestDatabase;
let sandbox: SandboxHandle;
let ingest: IngestHandle;
const prefix = testPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  ingest = await startIngest({ databaseUrl: db.url, prefix, sources: allSources() });
});
afterAll(async () => {
  await killAllServices();
  await ingest.close();
  await sandbox.close();
  await db.drop();
});

it('resumes with the same idempotency key: charged, emailed and shipped once', async () => {
  const env = (extra: Record<string, string> = {}) => testEnv({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url, extra });
  const a = spawnService('worker', env({ ONCEHOOK_FAULTS: 'worker.after-external-call:delay=60000', LOG_LEVEL: 'info' }));
  await a.waitFor(/worker ready/);
  expect((await send(ingest.url, 'shopify', await shopifyOrder(1))).status).toBe(202);

  // The charge went through at the payment API; A stalls before recording it.
  await a.waitFor(/oncehook-fault worker.after-external-call/);
  expect(sandbox.stats().payment.applied).toBe(1);
  const chargeKey = Object.keys(sandbox.stats().payment.appliedByKey)[0];
  // The worker logged the key it sent before calling; its stdout may still be on the way (the
  // sandbox answered first): wait for the line, never read the lines once.
  const sentKey = /"idempotencyKey":"([^"]+)"/.exec(await a.waitFor(/"idempotencyKey":"[^"]+"/))?.[1];
  expect(sentKey).toBe(chargeKey);

  const b = spawnService('worker', env());
  await b.waitFor(/worker ready/);
  const killedAt = Date.now();
  await a.kill9();

  const { run } = await waitFor(
    async () => {
      const found = await onlyRun(db.pool, 'shopify', 'wh-order-1').catch(() => null);
      return found?.event.state === 'done' ? found : null;
    },
    { what: 'order event done by worker B' },
  );
  console.log(`[figure] kill -9 after an external call -> done by another worker in ${Date.now() - killedAt} ms (LEASE_MS=2000)`);

  expect(run.attempts).toBe(2);
  const stats = sandbox.stats();
  expect(stats.payment.applied).toBe(1); // nothing new
  expect(stats.payment.replays).toBe(1); // B re-sent the charge with the same key
  expect(Object.keys(stats.payment.appliedByKey)).toEqual([chargeKey]);
  expect(stats.email.applied).toBe(1);
  expect(stats.fulfilment.applied).toBe(1);
  await b.waitFor(new RegExp(`"idempotencyKey":"${chargeKey}"`), 5_000);
});
