/**
 * Issue 66's new surface: the Postgres queue's jobs page (`/admin/queues` on
 * QUEUE_BACKEND=postgres), attacked as the admin searches were (round-three.ts, F1).
 *
 *   queue-page  1,000,000 jobs waiting in the queue's table; 10, then 50 clients reloading the
 *               jobs page as fast as it answers, with one read-only token and with one each,
 *               beside signed deliveries one at a time and in bursts of 50 (whose claims insert
 *               into that same table): the deliveries' answers and times, /readyz, the page's
 *               answers
 *
 * The page reads through the admin's pool, statement and lock timeouts (ADMIN_POOL_SIZE,
 * ADMIN_STATEMENT_TIMEOUT_MS) and counts stop at QUEUE_COUNT_CAP: the test of those bounds is
 * test/postgres-queue.test.ts; this prints what they do under load.
 */
import { randomBytes } from 'node:crypto';
import { queueSchemaFor } from '@oncehook/core';
import { paymentSucceeded, signStripe } from '@oncehook/harness';
import { deliveriesBesideAdmins, describeDeliveries, timedDeliveries } from './beside-admin.js';
import { type ScenarioRun, sql, startIngest } from './common.js';

const queuePage: ScenarioRun = async (root, databaseUrl) => {
  const filled = 1_000_000;
  const tokens = Array.from({ length: 50 }, (_, i) => `viewer${i}-readonly-attack-token-0123456789`);
  const prefix = `attack-qp-${randomBytes(3).toString('hex')}`;
  const { ingest, url } = await startIngest(root, databaseUrl, {
    QUEUE_BACKEND: 'postgres',
    QUEUE_PREFIX: prefix,
    ADMIN_TOKENS: tokens.map((t, i) => `viewer${i}=${t}`).join(','),
    ADMIN_READ_ONLY: 'true',
  });
  // The table exists once ingest has claimed a delivery (its first claim creates it).
  const first = signStripe(paymentSucceeded(`evt_qp_first_${randomBytes(3).toString('hex')}`));
  await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: first.body, headers: first.headers });
  await sql(
    databaseUrl,
    `INSERT INTO "${queueSchemaFor(prefix)}".ready (id, queue, data, priority, ord, run_at)
     SELECT 'fill-' || g, 'webhook-events', jsonb_build_object('rowId', g, 'source', 'stripe', 'eventId', 'evt_fill_' || g, 'attempt', 0),
            CASE WHEN g % 10 = 0 THEN 2 ELSE 0 END, g, now() + CASE WHEN g % 7 = 0 THEN interval '1 hour' ELSE interval '0' END
       FROM generate_series(1, ${filled}) g`,
  );
  await sql(databaseUrl, `ANALYZE "${queueSchemaFor(prefix)}".ready`);
  const pageOnce = async () => {
    const started = performance.now();
    const response = await fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${tokens[0]}` } });
    const text = await response.text();
    return { status: response.status, ms: performance.now() - started, counts: /<p>([^<]*waiting[^<]*)<\/p>/.exec(text)?.[1] ?? '' };
  };
  const quiet = describeDeliveries(await timedDeliveries(url));
  const alone = await pageOnce();
  const lines = [`queue-page: ${filled} jobs waiting; the page alone ${alone.status} in ${alone.ms.toFixed(0)} ms ("${alone.counts}"); no page load: deliveries ${quiet}`];
  for (const [clients, users] of [
    [10, 1],
    [50, 1],
    [50, 50],
  ] as const) {
    const during = await deliveriesBesideAdmins(url, clients, tokens.slice(0, users), 'queue-page');
    lines.push(`  ${clients} clients loading the jobs page with ${users === 1 ? 'one token' : `${users} tokens`}: deliveries ${during}`);
  }
  await ingest.stop();
  return lines.join('\n');
};

export const ISSUE_66 = { 'queue-page': queuePage } satisfies Record<string, ScenarioRun>;
