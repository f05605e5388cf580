/**
 * `npm run bench:search -- [--events N] [--keep] [--database NAME]`: how fast the console's
 * search answers at size (default 10,000,000 events).
 *
 * Fills a database of its own with N events as the pipeline leaves them (harness/event-fill.ts:
 * four sources, one run each, 0.5% failed in five error shapes, 1% waiting, received over 35
 * days), ANALYZEs it, then runs every kind of search the events page, the API and the CLI allow
 * through the operators' own code (createOperations().list, with its statement timeout), three
 * times each, and prints the best and worst time, how many rows came back and the plan's scans
 * (EXPLAIN of the same statement). `--keep` keeps the database and prints its name; `--database
 * NAME` measures a kept one again without filling it.
 */
import { createOperations, createQueries, SearchTooSlowError, type EventFilter, type JobTarget } from '@oncehook/core';
import { fillEvents, parseScriptArgs, planOfSearch, urlFor } from '@oncehook/harness';
import { createPool, DEFAULT_SCHEMA } from '@oncehook/shared';
import { parseEventSearch } from '../packages/oncehook/src/event-search.js';
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';

const { values } = parseScriptArgs(import.meta.url, {
  options: { events: { type: 'string', default: '10000000' }, keep: { type: 'boolean', default: false }, database: { type: 'string' } },
});
const events = Number(values.events);
const name = values.database ?? `oncehook_bench_search_${Math.random().toString(36).slice(2, 8)}`;
const url = values.database ? urlFor(values.database) : (await createTestDatabaseOn(name)).url;
const pool = createPool(url, { max: 2 });
const queries = createQueries(DEFAULT_SCHEMA);
const ops = createOperations({ pool, queries, queue: null as unknown as JobTarget });
const line = (text: string) => process.stdout.write(`${text}\n`);

/** The scans of the search statement for `filter`, in plan order. */
async function scans(filter: EventFilter): Promise<string> {
  const plan = await planOfSearch(pool, queries, filter);
  return [...new Set(plan.filter((s) => s.node.includes('Scan') && s.relation).map((s) => `${s.node} ${s.index ?? s.relation}`))].join(', ');
}

try {
  if (!values.database) {
    const chunk = 500_000;
    const started = Date.now();
    for (let from = 1; from <= events; from += chunk) {
      await fillEvents(pool, DEFAULT_SCHEMA, { from, to: Math.min(events, from + chunk - 1), total: events });
      line(`filled ${Math.min(events, from + chunk - 1).toLocaleString('en')} of ${events.toLocaleString('en')} events (${Math.round((Date.now() - started) / 1000)} s)`);
    }
    await pool.query(`VACUUM ANALYZE ${DEFAULT_SCHEMA}.events`);
    await pool.query(`VACUUM ANALYZE ${DEFAULT_SCHEMA}.handler_runs`);
  }
  const count = (await pool.query<{ n: number }>(`SELECT max(id)::bigint AS n FROM ${DEFAULT_SCHEMA}.events`)).rows[0]!.n;
  const size = (
    await pool.query<{ s: string }>(`SELECT pg_size_pretty(pg_total_relation_size('${DEFAULT_SCHEMA}.events') + pg_total_relation_size('${DEFAULT_SCHEMA}.handler_runs')) AS s`)
  ).rows[0]!.s;
  line(`\n${count.toLocaleString('en')} events (events + runs with indexes: ${size}); each search 3 times, through createOperations().list\n`);
  const group = (await ops.failureGroups({ limit: 1 }))[0]?.id ?? '000000000000';
  const middle = Math.floor(count / 2);
  const twentyDaysAgo = new Date(Date.now() - 20 * 86_400_000);
  const searches: [string, Record<string, string>][] = [
    ['newest page (no filter)', {}],
    ['a page in the middle (before=)', { before: String(middle) }],
    ['state=failed', { state: 'failed' }],
    ['state=received', { state: 'received' }],
    ['state=processing', { state: 'processing' }],
    ['waiting=paused', { waiting: 'paused' }],
    ['source=linear (5%)', { source: 'linear' }],
    ['source + type', { source: 'linear', type: 'linear.refunded' }],
    ['type alone (1%)', { type: 'linear.refunded' }],
    ['handler=send-receipt', { handler: 'send-receipt' }],
    ['event id, no source', { event_id: `shopify_${middle - (middle % 20) + 17}` }],
    ['event id with its source', { source: 'shopify', event_id: `shopify_${middle - (middle % 20) + 17}` }],
    ['since=2h', { since: '2h' }],
    ['a 1-hour window 20 days ago', { since: twentyDaysAgo.toISOString(), until: new Date(twentyDaysAgo.getTime() + 3_600_000).toISOString() }],
    ['payload equals, 100 matches in all', { payload: 'data.object.customer=cus_4242' }],
    ['payload equals + since=1d', { payload: 'data.object.customer=cus_4242', since: '1d' }],
    ['payload equals + source + 1-day window', { payload: 'data.object.currency=jpy', source: 'github', since: '21d', until: '20d' }],
    ['payload anywhere (contains) + since=1h', { payload: '~warehouse 12', since: '1h' }],
    ['payload anywhere, no bound', { payload: '~warehouse 12' }],
    ['payload anywhere, no match, no bound', { payload: '~no such text' }],
    ['failure group', { group, limit: '50' }],
  ];
  line('search                                     | best ms | worst ms | rows | scans');
  line('-------------------------------------------|---------|----------|------|------');
  let slowest = 0;
  for (const [label, raw] of searches) {
    const parsed = parseEventSearch(raw, { maxLimit: 1_000 });
    if (!parsed.ok) throw new Error(`${label}: ${parsed.message}`);
    const times: number[] = [];
    let rows: number | string = 0;
    for (let i = 0; i < 3; i += 1) {
      const t0 = performance.now();
      try {
        rows = (await ops.list(parsed.filter)).length;
      } catch (error) {
        if (!(error instanceof SearchTooSlowError)) throw error;
        rows = 'stopped at the timeout';
      }
      times.push(performance.now() - t0);
    }
    slowest = Math.max(slowest, ...(typeof rows === 'number' ? times : []));
    line(
      `${label.padEnd(42)} | ${Math.min(...times)
        .toFixed(1)
        .padStart(7)} | ${Math.max(...times)
        .toFixed(1)
        .padStart(8)} | ${String(rows).padStart(4)} | ${await scans(parsed.filter)}`,
    );
  }
  const t0 = performance.now();
  const groups = await ops.failureGroups();
  line(`failure groups (${groups.length})${' '.repeat(20)} | ${(performance.now() - t0).toFixed(1).padStart(7)} |`);
  line(`\nslowest search that answered: ${slowest.toFixed(0)} ms`);
} finally {
  await pool.end();
  if (values.keep || values.database) line(`database kept: ${name}`);
  else await dropDatabase(name);
}
process.exit(0);
