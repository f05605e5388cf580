/**
 * Failure groups group one cause (issue 64, finding 11): the shape of an error keeps a 3-digit
 * number only where it is a status code, and folds provider ids with or without a digit, while
 * words that look like ids (`in_progress`, `card_declined`) stay words. 50 runs failing at one
 * destination with varying response times and Stripe-shaped ids are one group. The upgrade
 * (migration 0018) re-shapes the failing runs and merges their groups, keeping the earliest
 * opening and a notification already sent: the upgrade notifies nothing. And a retry is one log
 * line (finding 5): the stack once per run.
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { destinationHandler, loadDestinations } from '@oncehook/core';
import { ROOT } from '@oncehook/harness';
import { defineHandler } from '@oncehook/sdk';
import { pino } from 'pino';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, T } from './helpers/stack.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

const shape = async (message: string) => (await db.pool.query<{ s: string }>('SELECT oncehook.error_shape($1) AS s', [message])).rows[0]!.s;

/** A Stripe-shaped id: the prefix and 14 letters and digits, sometimes none of them a digit. */
const stripeId = (prefix: string, digits: boolean) => {
  const letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  const alphabet = digits ? `${letters}0123456789` : letters;
  let id = '';
  for (const byte of randomBytes(14)) id += alphabet[byte % alphabet.length];
  return `${prefix}_${digits ? `${id.slice(0, 13)}7` : id}`;
};

describe('the shape of an error', () => {
  it('keeps a status code after answered, status, code or HTTP; every other number is #', async () => {
    expect(await shape('destination "crm" answered 400 in 434 ms: customer cus_AbCdEfGhIjKlMn has no ledger account, order 404')).toBe(
      'destination "crm" answered 400 in # ms: customer <id> has no ledger account, order #',
    );
    expect(await shape('status: 503, HTTP/1.1 404 Not Found, code=422, took 250 ms')).toBe('status: 503, HTTP/# 404 Not Found, code=422, took # ms');
    expect(await shape('notify API answered 422 to POST /notifications')).toBe('notify API answered 422 to POST /notifications');
    expect(await shape('retry after 500 ms; queue 404 deep')).toBe('retry after # ms; queue # deep');
  });

  it('folds provider ids with or without a digit; words that look like ids stay words', async () => {
    expect(await shape('customer cus_AbCdEfGhIjKlMn, charge ch_3MvXyZabcdefghij, invoice in_1N2b3C4d5E6f7G8h, txn_01h8a2b3c4d5e6f7g8h9j0k1m2')).toBe(
      'customer <id>, charge <id>, invoice <id>, <id>',
    );
    expect(await shape('payment_intent is in_progress; card_declined; insufficient_funds; requires_payment_method')).toBe(
      'payment_intent is in_progress; card_declined; insufficient_funds; requires_payment_method',
    );
  });

  it("the attack run's message and its kin, with Stripe-shaped ids and response times: one shape", async () => {
    const shapes = new Set<string>();
    for (let i = 0; i < 50; i += 1) {
      shapes.add(
        await shape(`destination "billing" answered 400 in ${100 + ((i * 37) % 500)} ms: customer ${stripeId('cus', i % 3 !== 0)} has no ledger account, order ${100 + i * 11}`),
      );
    }
    expect([...shapes]).toEqual(['destination "billing" answered 400 in # ms: customer <id> has no ledger account, order #']);
  });
});

it('50 runs failing at one destination, its answers taking varying times and naming Stripe-shaped ids, are one failure group', async () => {
  let n = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      n += 1;
      // The answer takes a varying time (so "answered 400 in N ms" varies) and names a customer id.
      setTimeout(() => res.writeHead(400, { 'content-type': 'text/plain' }).end(`customer ${stripeId('cus', n % 4 !== 0)} has no ledger account, order ${400 + n}`), n % 7);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const [destination] = loadDestinations({
      DESTINATION_NAME: 'billing',
      DESTINATION_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
      DESTINATION_SECRET: `whsec_${Buffer.from('failure-shapes-test-secret-32byte').toString('base64')}`,
    });
    const e = engine(db.pool, [destinationHandler(destination!)]);
    for (let i = 0; i < 50; i += 1) {
      const eventId = `evt_shape_${i}`;
      const rowId = await claimStripe(db.pool, eventId, 'invoice.paid');
      await e.processJob(dispatchJob(rowId, eventId));
    }
    const groups = (await q.failureGroups(db.pool)).filter((g) => g.handler === 'billing');
    expect(groups.map((g) => [g.shape, g.failed])).toEqual([['PermanentError: destination "billing" answered 400 in # ms: customer <id> has no ledger account, order #', 50]]);
  } finally {
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  }
});

it('the upgrade re-shapes failing runs and merges their groups: the earliest opening and a sent notification are kept, nothing is notified again', async () => {
  await db.pool.query(`DELETE FROM ${T.events}`);
  await db.pool.query('DELETE FROM oncehook.failure_groups');
  // Two runs and their groups as 0012's shape left them: split by a response time.
  const old = ['destination "crm" answered 400 in 434 ms: customer <id> has no ledger account', 'destination "crm" answered 400 in 291 ms: customer <id> has no ledger account'];
  const { rows } = await db.pool.query<{ id: number }>(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state) SELECT 'stripe', 'stripe', 'evt_upgrade_' || g, 't', '{}', 'failed' FROM generate_series(1, 2) g RETURNING id`,
  );
  for (const [i, shaped] of old.entries()) {
    await db.pool.query(`INSERT INTO ${T.runs} (event_row_id, handler, state, attempts, last_error, error_shape) VALUES ($1, 'crm', 'failed', 1, $2, $3)`, [
      rows[i]!.id,
      `PermanentError: ${shaped.replace('<id>', 'cus_AbCdEfGhIjKlMn')}`,
      `PermanentError: ${shaped}`,
    ]);
  }
  await db.pool.query(
    `INSERT INTO oncehook.failure_groups (handler, shape, opened_at, notified_at, notify_attempts) VALUES
       ('crm', $1, now() - interval '2 hours', now() - interval '2 hours', 1),
       ('crm', $2, now() - interval '1 hour', NULL, 3)`,
    old.map((s) => `PermanentError: ${s}`),
  );
  const migration = (await readFile(path.join(ROOT, 'packages/core/src/migrations/0018_error_shape_ids_and_statuses.sql'), 'utf8')).replaceAll(':ONCEHOOK_SCHEMA', 'oncehook');
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(migration);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  const merged = await db.pool.query<{ shape: string; early: boolean; notified: boolean; attempts: number }>(
    `SELECT shape, opened_at < now() - interval '90 minutes' AS early, notified_at IS NOT NULL AS notified, notify_attempts AS attempts FROM oncehook.failure_groups`,
  );
  expect(merged.rows).toEqual([{ shape: 'PermanentError: destination "crm" answered 400 in # ms: customer <id> has no ledger account', early: true, notified: true, attempts: 3 }]);
  const runs = await db.pool.query<{ error_shape: string }>(`SELECT DISTINCT error_shape FROM ${T.runs}`);
  expect(runs.rows).toEqual([{ error_shape: 'PermanentError: destination "crm" answered 400 in # ms: customer <id> has no ledger account' }]);
  // No new opening: the reconciler's next pass opens nothing (the merged group is known and notified).
  expect(await q.openFailureGroups(db.pool)).toEqual([]);
  expect(await q.unnotifiedFailureGroups(db.pool, 10, 20)).toEqual([]);
});

it('a retry is one log line (what failed, the attempt, the next try); the stack once per run, then at debug', async () => {
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const flaky = defineHandler({ name: 'flaky', source: 'stripe', type: 'invoice.paid' }, async () => {
    throw new Error('notify API answered 503 to POST /notifications');
  });
  const e = engine(db.pool, [flaky], { retry: { maxAttempts: 4, backoffMs: 1 } }, { log });
  const eventId = 'evt_retry_logs';
  const rowId = await claimStripe(db.pool, eventId, 'invoice.paid');
  await e.processJob(dispatchJob(rowId, eventId));
  for (let attempt = 1; attempt < 4; attempt += 1) await e.processJob({ rowId, source: 'stripe', eventId, handler: 'flaky', generation: 0, attempt });
  const retries = lines.map((l) => JSON.parse(l) as { msg: string; err?: { stack?: string }; attempt?: number }).filter((l) => l.msg.startsWith('run failed: attempt'));
  expect(retries.map((r) => r.msg)).toEqual([
    expect.stringMatching(/^run failed: attempt 1 of 4 failed; next try in \d+\.\d s$/),
    expect.stringMatching(/^run failed: attempt 2 of 4 failed; next try in /),
    expect.stringMatching(/^run failed: attempt 3 of 4 failed; next try in /),
  ]);
  expect(retries.filter((r) => r.err?.stack !== undefined)).toHaveLength(1);
  // Each later retry is one line: no stack frame in it.
  for (const r of retries.slice(1)) expect(JSON.stringify(r)).not.toMatch(/\\n\s+at /);
});
