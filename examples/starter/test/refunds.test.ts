// test/refunds.test.ts
/**
 * The handler under the test kit: checkHandler runs it on a real Postgres (a scratch database
 * it creates and drops), delivers the event twice, crashes it at every step boundary and
 * retries, and reports any effect that happened twice or state that differs from one clean run.
 * Our notification API is the test kit's stand-in: it answers a repeated idempotency key as the
 * first time, as real APIs do, and counts what it applied.
 * Needs a Postgres: ONCEHOOK_CHECK_DATABASE_URL, else DATABASE_URL, else
 * postgres://postgres@127.0.0.1:5432/postgres (`oncehook dev` prints one).
 */
import { readFile } from 'node:fs/promises';
import { checkHandler, startStandInApi } from '@oncehook/testkit';
import { expect, it } from 'vitest';

it('refunds survives duplicates and a crash at every step boundary', async () => {
  const api = await startStandInApi({ answer: (request) => ({ id: `ntf_${request.n}` }) });
  process.env.NOTIFY_API_URL = api.url;
  try {
    const { default: refunds } = await import('../src/webhooks/refunds.js');
    const migration = await readFile(new URL('../migrations/0001_refunds.sql', import.meta.url), 'utf8');
    const report = await checkHandler(
      refunds,
      { type: 'charge.refunded', payload: { id: 'evt_check', object: 'event', type: 'charge.refunded', data: { object: { id: 'ch_check', amount_refunded: 500 } } } },
      { setup: (db) => db.query(migration), state: async (db) => (await db.query('SELECT charge_id, amount_refunded, notification FROM refunds')).rows },
    );
    expect(report.problems).toEqual([]);
    // One notification, whatever the crashes and duplicates: the same key every time.
    expect(api.effects()).toHaveLength(1);
  } finally {
    await api.close();
  }
}, 120_000);
