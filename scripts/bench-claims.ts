/**
 * `npm run bench:claims -- [--sizes 0,1000000,10000000] [--claims 2000] [--rows keys|events]`
 *
 * Claim latency as the event table grows: for each size, fills the table with done events and
 * measures single claims (new events, and 20% duplicates) one at a time on one connection,
 * then one retention batch delete of 1000 rows. `--rows keys` (the default): retained keys, as
 * the payload horizon leaves them (payload pruned, `pruned_at` set, a body hash on a third of
 * them, spread over 400 days, KEY_RETENTION_DAYS); `--rows events`: done events with a small
 * payload, spread over 35 days.
 * Prints p50/p99 and the ratio to the empty table. Uses a database of its own on this
 * machine's Postgres and drops it at the end.
 */
import { createPool, DEFAULT_SCHEMA } from '@oncehook/shared';
import { createQueries } from '@oncehook/core';

const queries = createQueries(DEFAULT_SCHEMA);
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';
import { parseScriptArgs } from '@oncehook/harness';

const { values } = parseScriptArgs(import.meta.url, {
  options: { sizes: { type: 'string', default: '0,1000000,10000000' }, claims: { type: 'string', default: '2000' }, rows: { type: 'string', default: 'keys' } },
});
if (values.rows !== 'keys' && values.rows !== 'events') {
  process.stderr.write(`--rows takes keys or events (got "${values.rows}")\n`);
  process.exit(2);
}
const keys = values.rows === 'keys';
const spreadDays = keys ? 400 : 35;
const sizes = values.sizes.split(',').map(Number);
const claims = Number(values.claims);
const name = `oncehook_bench_claims_${Date.now().toString(36)}`;
const db = await createTestDatabaseOn(name);
const pool = createPool(db.url, { max: 2 });
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const rows: { size: number; p50: number; p99: number; deleteMs: number }[] = [];
let filled = 0;
try {
  for (const size of sizes) {
    while (filled < size) {
      const chunk = Math.min(1_000_000, size - filled);
      const started = performance.now();
      await pool.query(
        `INSERT INTO oncehook.events (provider, kind, event_id, type, payload, body_hash, pruned_at, state, received_at, updated_at, finished_at)
         SELECT (ARRAY['stripe','github','shopify'])[1 + g % 3], 'x', 'evt_fill_' || g, 't',
                CASE WHEN $3::boolean THEN NULL ELSE '{}'::jsonb END,
                -- GitHub's and Shopify's keys carry a body hash (unsigned ids are deduplicated by body).
                CASE WHEN $3::boolean AND g % 3 = 1 THEN sha256(('body ' || g)::bytea) END,
                CASE WHEN $3::boolean THEN now() END,
                'done', now() - (g % $4::int) * interval '1 day' - (g % 86400) * interval '1 second', now(), now()
           FROM generate_series($1::bigint, $2::bigint) g`,
        [filled + 1, filled + chunk, keys, spreadDays],
      );
      filled += chunk;
      process.stdout.write(`  filled ${filled} rows (+${chunk} in ${((performance.now() - started) / 1000).toFixed(1)} s)\n`);
    }
    await pool.query('VACUUM ANALYZE oncehook.events');
    const latencies: number[] = [];
    for (let i = 0; i < claims; i += 1) {
      const duplicate = i > 10 && i % 5 === 0;
      const eventId = duplicate ? `evt_claim_${size}_${i - 5}` : `evt_claim_${size}_${i}`;
      const started = performance.now();
      await queries.claimEvent(pool, { source: 'stripe', kind: 'stripe', eventId, type: 't', signedAt: null, rawBody: '{"id":"x"}', payload: {}, meta: {} });
      latencies.push(performance.now() - started);
    }
    // One retention batch of 1000 of the oldest done rows (inside the filled range).
    const started = performance.now();
    await queries.deleteExpiredBatch(pool, 'stripe', keys ? 200 : 20, 1000);
    const deleteMs = performance.now() - started;
    rows.push({ size, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), deleteMs });
    process.stdout.write(
      `  size ${size}: claim p50 ${percentile(latencies, 0.5).toFixed(3)} ms, p99 ${percentile(latencies, 0.99).toFixed(3)} ms; retention batch of 1000: ${deleteMs.toFixed(1)} ms\n`,
    );
  }
  const base = rows[0]!;
  // Deletion is compared from the first size that had rows to delete.
  const deleteBase = rows.find((r) => r.size > 0) ?? base;
  process.stdout.write(`\n${keys ? 'retained keys (pruned rows)' : 'done events'} in the table\n`);
  process.stdout.write(`\nrows in table | claim p50 | claim p99 | vs ${base.size} rows (p50, p99) | 1000-row retention batch | vs ${deleteBase.size} rows\n`);
  for (const r of rows) {
    process.stdout.write(
      `${String(r.size).padStart(13)} | ${r.p50.toFixed(3)} ms | ${r.p99.toFixed(3)} ms | ${(r.p50 / base.p50).toFixed(2)}x, ${(r.p99 / base.p99).toFixed(2)}x | ${r.deleteMs.toFixed(1)} ms | ${r.size > 0 ? `${(r.deleteMs / deleteBase.deleteMs).toFixed(2)}x` : '(nothing to delete)'}\n`,
    );
  }
} finally {
  await pool.end();
  await dropDatabase(name);
}
