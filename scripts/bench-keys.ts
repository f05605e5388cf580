/**
 * `npm run bench:keys -- [--events N]`: what an event costs on disk before and after its
 * payload horizon, per million events.
 *
 * Fills a database of its own with N done events the way the pipeline leaves them (a ~1 KB
 * Stripe payload, meta, a body hash for a third of them, one handler run with one attempt and
 * one step, three deliveries), measures every Oncehook table with its indexes, then prunes them
 * all with retention's own statement (queries.pruneExpiredBatch), rewrites the tables
 * (VACUUM FULL, so the figure is the steady size, not the dead space autovacuum reclaims over
 * time) and measures again. Prints bytes per event and GB per million.
 */
import { createPool, DEFAULT_SCHEMA } from '@oncehook/shared';
import { createQueries } from '@oncehook/core';
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';
import { parseScriptArgs } from '@oncehook/harness';

const { values } = parseScriptArgs(import.meta.url, { options: { events: { type: 'string', default: '200000' } } });
const events = Number(values.events);
const name = `oncehook_bench_keys_${Math.random().toString(36).slice(2, 8)}`;
const db = await createTestDatabaseOn(name);
const pool = createPool(db.url, { max: 2 });
const S = DEFAULT_SCHEMA;
const tables = ['events', 'handler_runs', 'steps', 'run_attempts', 'deliveries', 'operator_actions'];

async function sizes(): Promise<{ total: number; byTable: Record<string, number> }> {
  const byTable: Record<string, number> = {};
  for (const table of tables) {
    const { rows } = await pool.query<{ bytes: string }>(`SELECT pg_total_relation_size('${S}.${table}')::text AS bytes`);
    byTable[table] = Number(rows[0]?.bytes ?? 0);
  }
  return { total: Object.values(byTable).reduce((a, b) => a + b, 0), byTable };
}

try {
  process.stdout.write(`filling ${events} done events...\n`);
  await pool.query(
    `INSERT INTO ${S}.events (provider, kind, event_id, type, payload, signed_at, meta, state, body_hash, received_at, updated_at, finished_at)
     SELECT 'stripe', 'stripe', 'evt_' || substr(md5(g::text), 1, 24), 'payment_intent.succeeded',
            jsonb_build_object('id', 'evt_' || g, 'object', 'event', 'type', 'payment_intent.succeeded', 'created', 1700000000 + g,
              'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || g, 'amount', 1000, 'currency', 'usd', 'customer', 'cus_' || (g % 1000), 'description', repeat('x', 760)))),
            now(), '{"livemode":"false"}', 'done', CASE WHEN g % 3 = 0 THEN sha256(g::text::bytea) END,
            now() - interval '1 day', now(), now()
       FROM generate_series(1, $1::int) g`,
    [events],
  );
  // A done run's attempt is in its row (migrations/0019): no run_attempts row.
  await pool.query(
    `INSERT INTO ${S}.handler_runs (event_row_id, handler, state, attempts, attempt_started_at, finished_at) SELECT id, 'shop.payments', 'done', 1, now(), now() FROM ${S}.events`,
  );
  await pool.query(
    `INSERT INTO ${S}.steps (run_id, generation, name, kind, result) SELECT id, 0, 'credit-ledger', 'local', '{"entryId": 12345, "accountId": "cus_1", "amount": 1000}' FROM ${S}.handler_runs`,
  );
  await pool.query(`INSERT INTO ${S}.deliveries (event_row_id, duplicate) SELECT id, d > 1 FROM ${S}.events, generate_series(1, 3) d`);
  await pool.query('VACUUM FULL');
  const full = await sizes();

  process.stdout.write("pruning them with retention's statement...\n");
  const queries = createQueries(S);
  for (;;) {
    const n = await queries.pruneExpiredBatch(pool, 'stripe', 0, 10_000);
    if (n < 10_000) break;
  }
  await pool.query('VACUUM FULL');
  const pruned = await sizes();

  const per = (bytes: number) => Math.round(bytes / events);
  const gbPerMillion = (bytes: number) => ((bytes / events) * 1e6) / 1024 ** 3;
  process.stdout.write(`\nOn disk, tables with their indexes, per event (${events} events)\n`);
  process.stdout.write('table            | full event (bytes) | key only, pruned (bytes)\n');
  for (const table of tables)
    process.stdout.write(`${table.padEnd(16)} | ${String(per(full.byTable[table]!)).padStart(18)} | ${String(per(pruned.byTable[table]!)).padStart(24)}\n`);
  process.stdout.write(`${'total'.padEnd(16)} | ${String(per(full.total)).padStart(18)} | ${String(per(pruned.total)).padStart(24)}\n`);
  process.stdout.write(
    `\nPer million events: ${gbPerMillion(full.total).toFixed(2)} GB with payloads, ${gbPerMillion(pruned.total).toFixed(3)} GB as keys (${(full.total / pruned.total).toFixed(1)}x less)\n`,
  );
} finally {
  await pool.end();
  await dropDatabase(name);
}
process.exit(0);
