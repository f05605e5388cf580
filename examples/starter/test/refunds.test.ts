/**
 * The handler under the test kit: checkHandler runs it on a real Postgres (a scratch database
 * it creates and drops), delivers the event twice, crashes it at every step boundary and
 * retries, and reports any effect that happened twice or state that differs from one clean run.
 * Needs a Postgres: ONCEHOOK_CHECK_DATABASE_URL, else DATABASE_URL, else
 * postgres://postgres@127.0.0.1:5432/postgres (`oncehook dev` prints one).
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { checkHandler } from '@oncehook/testkit';
import { expect, it } from 'vitest';

it('refunds survives duplicates and a crash at every step boundary', async () => {
  // A stand-in for the notification API that answers a repeated idempotency key as the first time.
  const seen = new Map<string, string>();
  const server = createServer((req, res) => {
    const key = String(req.headers['idempotency-key']);
    if (!seen.has(key)) seen.set(key, `ntf_${seen.size}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: seen.get(key) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  process.env.NOTIFY_API_URL = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  try {
    const { default: refunds } = await import('../src/webhooks/refunds.js');
    const migration = await readFile(new URL('../migrations/0001_refunds.sql', import.meta.url), 'utf8');
    const report = await checkHandler(
      refunds,
      { type: 'charge.refunded', payload: { id: 'evt_check', object: 'event', type: 'charge.refunded', data: { object: { id: 'ch_check', amount_refunded: 500 } } } },
      { setup: (db) => db.query(migration), state: async (db) => (await db.query('SELECT charge_id, amount_refunded, notification FROM refunds')).rows },
    );
    expect(report.problems).toEqual([]);
  } finally {
    server.close();
  }
}, 120_000);
