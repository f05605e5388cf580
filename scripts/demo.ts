/**
 * `npm run demo [-- --keep] [--events N]`: Oncehook in one minute, on this machine's Postgres
 * and Redis.
 *
 * Starts the sandbox effect APIs, ingest and two workers (a database and a queue prefix of this
 * run's own, so two demos at once never touch each other), fires a burst of duplicated,
 * concurrent, partly forged deliveries from three providers, waits until everything is
 * processed, and tells what happened: deliveries sent, new versus duplicate versus rejected,
 * each effect applied once, and which events had no handler and why.
 *
 * Without --keep it then stops everything and removes what it created (its database and its
 * Redis keys). With --keep the processes stay up, and the demo prints where to look (the admin
 * pages, metrics) while they are live; Ctrl-C stops them and cleans up.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { freePort, makeEvent, pool, ProviderSimulator, REDIS_URL, simulatorSourcesEnv, spawnService, type Service, type SimEvent, type SimSource } from '@oncehook/harness';
import { createEventQueue, createRedis } from '@oncehook/core';
import { createPool } from '@oncehook/shared';
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';

const { values } = parseArgs({ options: { keep: { type: 'boolean', default: false }, events: { type: 'string', default: '60' } } });
const say = (line = '') => process.stdout.write(`${line}\n`);
const services: Service[] = [];
const stopAll = async () => {
  await Promise.all(services.map((s) => s.stop(5_000)));
};
const run = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const name = `oncehook_demo_${run}`;
const prefix = `demo-${run}`;

/** QUEUE_BACKEND=postgres npm run demo: the processes inherit it; the queue is in the demo's database. */
const queueInPostgres = process.env.QUEUE_BACKEND === 'postgres';

/** Removes what this run created: its database (with the queue's schema, on Postgres) and its queue's Redis keys. */
async function cleanUp(): Promise<void> {
  if (!queueInPostgres) {
    const redis = createRedis(process.env.REDIS_URL ?? REDIS_URL, 'producer');
    const queue = createEventQueue(redis, prefix);
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    redis.disconnect();
  }
  await dropDatabase(name).catch(() => {});
}

try {
  const db = await createTestDatabaseOn(name);
  const dbPool = createPool(db.url, { max: 2 });
  const adminPassword = randomBytes(9).toString('base64url');
  const [sandboxPort, ingestPort] = [await freePort(), await freePort()];
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;

  say('Oncehook demo');
  say('=============');
  say(`Starting the sandbox APIs (:${sandboxPort}), ingest (:${ingestPort}) and two workers on database ${name}, queue prefix ${prefix}...`);
  const sandbox = spawnService('sandbox', { SANDBOX_PORT: String(sandboxPort) });
  services.push(sandbox);
  await sandbox.waitFor(/sandbox listening/);
  const common = { DATABASE_URL: db.url, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn', LOG_FORMAT: 'pretty' };
  const ingest = spawnService('ingest', {
    ...common,
    PORT: String(ingestPort),
    HOST: '127.0.0.1',
    ADMIN_USERNAME: 'admin',
    ADMIN_PASSWORD: adminPassword,
    ...simulatorSourcesEnv(),
  });
  services.push(ingest);
  const workers = [1, 2].map(() =>
    spawnService('worker', {
      ...common,
      METRICS_PORT: '0',
      ONCEHOOK_HANDLERS: 'examples/shop',
      SHOP_PAYMENT_API_URL: `${sandboxUrl}/payment`,
      SHOP_EMAIL_API_URL: `${sandboxUrl}/email`,
      SHOP_FULFILMENT_API_URL: `${sandboxUrl}/fulfilment`,
    }),
  );
  services.push(...workers);
  await Promise.all([ingest.waitFor(/ingest listening/), ...workers.map((w) => w.waitFor(/worker ready/))]);

  // The sandbox loses the answer to 1 in 10 calls after applying them: our retries must not double anything.
  await fetch(`${sandboxUrl}/faults`, {
    method: 'POST',
    body: JSON.stringify(['payment', 'email', 'fulfilment'].map((service) => ({ service, mode: 'apply_then_fail', probability: 0.1 }))),
  });

  const count = Number(values.events);
  const sources: SimSource[] = ['stripe', 'standard-webhooks', 'github'];
  const events: SimEvent[] = Array.from({ length: count }, (_, n) => makeEvent(sources[n % 3]!, n, prefix));
  const forged = [0, 1, 2].map((n) => makeEvent('stripe', 90_000 + n, prefix, true));
  const simulator = new ProviderSimulator({ baseUrl: `http://127.0.0.1:${ingestPort}`, invalidShare: 0.1 });
  say(`Firing ${count} events (Stripe order payments, Standard Webhooks renewals, GitHub issues), each delivered 3 or 4 times, partly at the same moment, plus forged copies...`);
  const started = performance.now();
  await pool([...events, ...forged], 30, (event) => simulator.deliverEvent(event, event.forged ? 1 : 3 + Math.floor(Math.random() * 2)));

  for (;;) {
    const { rows } = await dbPool.query<{ pending: number }>(`SELECT count(*)::int AS pending FROM oncehook.events WHERE state IN ('received','processing')`);
    if (rows[0]?.pending === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);

  const outcomes = [...simulator.outcomes.values()];
  const answers = outcomes.flatMap((o) => o.answers);
  const invalid = outcomes.flatMap((o) => o.invalidAnswers);
  const { rows: states } = await dbPool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM oncehook.events GROUP BY state ORDER BY state`);
  const stats = (await (await fetch(`${sandboxUrl}/stats`)).json()) as Record<string, { applied: number; replays: number; faults: number; appliedByKey: Record<string, number> }>;
  const maxPerKey = Math.max(0, ...Object.values(stats).flatMap((s) => Object.values(s.appliedByKey)));
  const { rows: ledger } = await dbPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger_entries`);

  say();
  say(`Deliveries sent:      ${answers.length + invalid.length} in ${seconds} s (including processing)`);
  // On a loaded machine a claim can commit after the ingest already answered 503 (CLAIM_TIMEOUT_MS):
  // the provider retries and that retry is the 200 duplicate. Nothing is lost, but that event has no 202.
  const claimedUnderRetry = outcomes.filter((o) => !o.event.forged && o.answers.includes(200) && !o.answers.includes(202)).length;
  const retryLater = answers.filter((a) => a !== 200 && a !== 202);
  say(`  new (202):          ${answers.filter((a) => a === 202).length}  <- one per event: the claim`);
  if (claimedUnderRetry > 0) {
    say(`                      + ${claimedUnderRetry} claimed while the answer was a retryable error; the retry answered duplicate`);
  }
  say(`  duplicate (200):    ${answers.filter((a) => a === 200).length}  <- answered 2xx, no work`);
  if (retryLater.length > 0) {
    say(`  retry later:        ${retryLater.length}  <- 503/timeout under load (${[...new Set(retryLater)].join(', ')}); the provider retried, nothing was lost`);
  }
  say(`  forged (400/401):   ${invalid.filter((a) => a === 400 || a === 401).length}  <- nothing stored`);
  say(`Events:               ${states.map((s) => `${s.n} ${s.state}`).join(', ')}`);
  say(`Effects applied once each (sandbox counters; most applied per idempotency key: ${maxPerKey}):`);
  say(`  charges (renewals): ${stats.payment?.applied}`);
  say(`  receipts (orders):  ${stats.email?.applied}`);
  say(`  shipments (orders): ${stats.fulfilment?.applied}`);
  say(`  ledger entries:     ${ledger[0]?.n}`);
  say(
    `  lost answers injected by the sandbox: ${(stats.payment?.faults ?? 0) + (stats.email?.faults ?? 0) + (stats.fulfilment?.faults ?? 0)}, answered again from its idempotency store: ${(stats.payment?.replays ?? 0) + (stats.email?.replays ?? 0) + (stats.fulfilment?.replays ?? 0)}`,
  );
  const { rows: unhandled } = await dbPool.query<{ provider: string; type: string; n: number }>(
    `SELECT provider, type, count(*)::int AS n FROM oncehook.events e
      WHERE NOT EXISTS (SELECT 1 FROM oncehook.handler_runs r WHERE r.event_row_id = e.id) AND state IN ('done', 'failed')
      GROUP BY provider, type ORDER BY provider, type`,
  );
  for (const u of unhandled) {
    say(`No handler:           ${u.n} ${u.provider} "${u.type}" events: the example shop registers no handler for them, so they are recorded`);
    say('                      done without effects (UNHANDLED_EVENTS=done; =fail would dead-letter them to catch a missing module)');
  }
  await dbPool.end();

  if (values.keep) {
    say();
    say('Still running (--keep). Where to look, while it runs:');
    say(`  admin:     http://127.0.0.1:${ingestPort}/admin  (user admin, password ${adminPassword})`);
    say(`  metrics:   http://127.0.0.1:${ingestPort}/metrics  (webhook_events_total{result="new"|"duplicate"|"rejected"})`);
    say(`  sandbox:   ${sandboxUrl}/stats`);
    say(`  events:    ${queueInPostgres ? 'QUEUE_BACKEND=postgres ' : ''}DATABASE_URL=${db.url} QUEUE_PREFIX=${prefix} npm run oncehook -- list`);
    say('Ctrl-C stops it and removes its database and queue.');
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
  } else {
    say();
    say('Stopped, and its database and queue removed. `npm run demo -- --keep` keeps it running to look around (admin pages, metrics).');
  }
  await stopAll();
  await cleanUp();
  process.exit(maxPerKey <= 1 ? 0 : 1);
} catch (error) {
  process.stderr.write(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await stopAll();
  await cleanUp();
  process.exit(1);
}
