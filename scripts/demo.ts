/**
 * `npm run demo [-- --keep]`: Oncehook in one minute, on this machine's Postgres and Redis.
 *
 * Starts the sandbox effect APIs, ingest and two workers (a fresh `oncehook_demo` database and
 * queue prefix), fires a burst of duplicated, concurrent, partly forged deliveries from three
 * providers, waits until everything is processed, and tells what happened: deliveries sent, new
 * versus duplicate versus rejected, and each effect applied once. With --keep the processes stay
 * up so you can look around (metrics, the database); Ctrl-C stops them.
 */
import { parseArgs } from 'node:util';
import { freePort, makeEvent, pool, ProviderSimulator, simulatorSourcesEnv, spawnService, type Service, type SimEvent, type SimSource } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { createTestDatabaseOn, dropDatabase } from './bench/databases';

const { values } = parseArgs({ options: { keep: { type: 'boolean', default: false }, events: { type: 'string', default: '60' } } });
const say = (line = '') => process.stdout.write(`${line}\n`);
const services: Service[] = [];
const stopAll = async () => {
  await Promise.all(services.map((s) => s.stop(5_000)));
};

try {
  const name = 'oncehook_demo';
  await dropDatabase(name);
  const db = await createTestDatabaseOn(name);
  const dbPool = createPool(db.url, { max: 2 });
  const prefix = `demo-${Date.now().toString(36)}`;
  const [sandboxPort, ingestPort] = [await freePort(), await freePort()];
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;

  say('Oncehook demo');
  say('=============');
  say(`Starting the sandbox APIs (:${sandboxPort}), ingest (:${ingestPort}) and two workers on database ${name}...`);
  const sandbox = spawnService('sandbox', { SANDBOX_PORT: String(sandboxPort) });
  services.push(sandbox);
  await sandbox.waitFor(/sandbox listening/);
  const common = { DATABASE_URL: db.url, QUEUE_PREFIX: prefix, LOG_LEVEL: 'warn' };
  const ingest = spawnService('ingest', {
    ...common,
    PORT: String(ingestPort),
    HOST: '127.0.0.1',
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
  say(`  new (202):          ${answers.filter((a) => a === 202).length}  <- one per event: the claim`);
  say(`  duplicate (200):    ${answers.filter((a) => a === 200).length}  <- answered 2xx, no work`);
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
  say();
  say('Where to look:');
  say(`  metrics:   http://127.0.0.1:${ingestPort}/metrics  (webhook_events_total{result="new"|"duplicate"|"rejected"})`);
  say(`  readiness: http://127.0.0.1:${ingestPort}/readyz`);
  say(`  sandbox:   ${sandboxUrl}/stats`);
  say(`  events:    psql ${name} -c "select provider, event_id, type, state, note from oncehook.events limit 10"`);
  say(`  steps:     psql ${name} -c "select event_row_id, name, result from webhook_event_steps limit 10"`);
  await dbPool.end();

  if (values.keep) {
    say();
    say('Still running (--keep). Ctrl-C to stop.');
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
  }
  await stopAll();
  process.exit(maxPerKey <= 1 ? 0 : 1);
} catch (error) {
  process.stderr.write(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  await stopAll();
  process.exit(1);
}
