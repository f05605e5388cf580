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
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { queueSchemaFor } from '@oncehook/core';
import { paymentSucceeded, signStripe, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { count, type ScenarioRun, spread, sql, startIngest } from './common.js';

const PAGE_CLIENTS = fileURLToPath(new URL('./search-clients.ts', import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
  const lines: string[] = [];
  let n = 0;
  const deliverOne = async () => {
    n += 1;
    const delivery = signStripe(paymentSucceeded(`evt_qp_${n}_${randomBytes(3).toString('hex')}`));
    const started = performance.now();
    const response = await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers }).catch(() => null);
    await response?.arrayBuffer();
    return { status: response?.status ?? 0, ms: performance.now() - started };
  };
  const deliveries = async () => {
    const one: { status: number; ms: number }[] = [];
    for (let i = 0; i < 20; i += 1) one.push(await deliverOne());
    const bursts: { status: number; ms: number }[] = [];
    for (let b = 0; b < 3; b += 1) bursts.push(...(await Promise.all(Array.from({ length: 50 }, deliverOne))));
    return { one, bursts };
  };
  const pageOnce = async () => {
    const started = performance.now();
    const response = await fetch(`${url}/admin/queues`, { headers: { authorization: `Bearer ${tokens[0]}` } });
    const text = await response.text();
    return { status: response.status, ms: performance.now() - started, counts: /<p>([^<]*waiting[^<]*)<\/p>/.exec(text)?.[1] ?? '' };
  };
  const quiet = await deliveries();
  const alone = await pageOnce();
  lines.push(
    `queue-page: ${filled} jobs waiting; the page alone ${alone.status} in ${alone.ms.toFixed(0)} ms ("${alone.counts}"); no page load: deliveries one at a time ${JSON.stringify(count(quiet.one))} ${spread(quiet.one.map((a) => a.ms))}; bursts of 50 ${JSON.stringify(count(quiet.bursts))} ${spread(quiet.bursts.map((a) => a.ms))}`,
  );
  for (const [clients, users] of [
    [10, 1],
    [50, 1],
    [50, 50],
  ] as const) {
    let running = true;
    const attackers = spawn(process.execPath, [...SOURCE_NODE_ARGS, PAGE_CLIENTS, url, String(clients), tokens.slice(0, users).join(','), 'queue-page'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let printed = '';
    attackers.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    const ready: number[] = [];
    const readyWatch = (async () => {
      while (running) {
        ready.push((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(10_000) }).catch(() => null))?.status ?? 0);
        await sleep(500);
      }
    })();
    await sleep(2_000);
    const during = await deliveries();
    running = false;
    const exited = new Promise((resolve) => attackers.once('close', resolve));
    attackers.kill('SIGTERM');
    await Promise.all([exited, readyWatch]);
    const pages = printed.trim().split('\n').pop() ?? '{}';
    lines.push(
      `  ${clients} clients loading the jobs page with ${users === 1 ? 'one token' : `${users} tokens`}: deliveries one at a time ${JSON.stringify(count(during.one))} ${spread(during.one.map((a) => a.ms))}; bursts of 50 ${JSON.stringify(count(during.bursts))} ${spread(during.bursts.map((a) => a.ms))}; /readyz ${ready.filter((s) => s !== 200).length} of ${ready.length} not 200; pages answered ${pages}`,
    );
  }
  await ingest.stop();
  return lines.join('\n');
};

export const ISSUE_66 = { 'queue-page': queuePage } satisfies Record<string, ScenarioRun>;
