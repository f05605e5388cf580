/**
 * The console's searches keep the plans that make them fast at 10 million events (issue 33;
 * the figures: `npm run bench:search`, docs/operating.md "Searching events"). On 200,000 events
 * filled as the pipeline leaves them (harness fillEvents) and ANALYZEd, each kind of search is
 * EXPLAINed as listEvents sends it: a page reads the primary key newest first and stops at the
 * page (never a sort of the table), a time range becomes a range of row ids, an event id finds
 * its row through events_key with or without its source, and the failure groups and a group's
 * events are answered from handler_runs_failing_idx. None reads a whole table.
 */
import { createQueries } from '@oncehook/core';
import { fillEvents, planOf, planOfSearch, type PlanStep } from '@oncehook/harness';
import { DEFAULT_SCHEMA } from '@oncehook/shared';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseEventSearch } from '../packages/oncehook/src/event-search.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';

const EVENTS = 200_000;
const queries = createQueries(DEFAULT_SCHEMA);
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await fillEvents(db.pool, DEFAULT_SCHEMA, { from: 1, to: EVENTS, total: EVENTS });
  await db.pool.query(`VACUUM ANALYZE ${DEFAULT_SCHEMA}.events`);
  await db.pool.query(`VACUUM ANALYZE ${DEFAULT_SCHEMA}.handler_runs`);
}, 120_000);
afterAll(async () => {
  await db?.drop();
});

async function plan(raw: Record<string, string>): Promise<PlanStep[]> {
  const parsed = parseEventSearch(raw, { maxLimit: 1_000 });
  if (!parsed.ok) throw new Error(parsed.message);
  return planOfSearch(db.pool, queries, parsed.filter);
}

/** The scan that reads the events table (the search's driving scan). */
const eventsScan = (steps: PlanStep[]) => steps.find((s) => s.relation === 'events');
/** Whole-table reads of the tables that grow with the events (the failure groups are a few rows). */
const seqScans = (steps: PlanStep[]) => steps.filter((s) => s.node === 'Seq Scan' && s.relation !== 'failure_groups').map((s) => s.relation);

it('a page, with or without filters on the event row, reads the primary key newest first and stops at the page', async () => {
  const searches: Record<string, string>[] = [
    {},
    { before: String(EVENTS / 2) },
    { source: 'linear' },
    { source: 'linear', type: 'linear.refunded' },
    { type: 'github.paid' },
    { state: 'processing' },
  ];
  for (const raw of searches) {
    const steps = await plan(raw);
    expect(steps[0]?.node, JSON.stringify(raw)).toBe('Limit');
    expect(eventsScan(steps), JSON.stringify(raw)).toMatchObject({ node: 'Index Scan', index: 'events_pkey' });
    expect(steps.some((s) => s.node === 'Sort')).toBe(false);
    expect(seqScans(steps)).toEqual([]);
  }
});

it('a time range is a range of row ids on the primary key, wherever it lies', async () => {
  const at = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString();
  const searches: Record<string, string>[] = [{ since: '2h' }, { since: at(20), until: at(19.9) }, { until: at(30) }];
  for (const raw of searches) {
    const scan = eventsScan(await plan(raw));
    expect(scan, JSON.stringify(raw)).toMatchObject({ node: 'Index Scan', index: 'events_pkey' });
    expect(scan?.indexCond, JSON.stringify(raw)).toMatch(/\bid [<>]=? /);
  }
});

it('an event id is found through events_key, with or without its source', async () => {
  const searches: Record<string, string>[] = [{ event_id: 'shopify_100017' }, { event_id: 'shopify_100017', source: 'shopify' }];
  for (const raw of searches) {
    expect(eventsScan(await plan(raw)), JSON.stringify(raw)).toMatchObject({ index: 'events_key' });
  }
});

it('the failure groups and a group events are answered from handler_runs_failing_idx', async () => {
  const groups = await planOf(
    db.pool,
    (db) => queries.failureGroups(db),
    (sql) => sql.includes('GROUP BY r.handler, r.error_shape'),
  );
  expect(groups.find((s) => s.relation === 'handler_runs')).toMatchObject({ node: 'Index Only Scan', index: 'handler_runs_failing_idx' });
  expect(seqScans(groups)).toEqual([]);
  const [group] = await queries.failureGroups(db.pool, { limit: 1 });
  const steps = await plan({ group: group!.id });
  expect(steps.filter((s) => s.relation === 'handler_runs').map((s) => s.index)).toContain('handler_runs_failing_idx');
  expect(seqScans(steps)).toEqual([]);
});

it('no search reads a whole table', async () => {
  // (A handler alone is answered by a hash of handler_runs at this size and by handler_runs_key
  // at 10 million: bench:search shows it; the planner's choice at 200,000 rows pins nothing.)
  const searches: Record<string, string>[] = [{ state: 'failed' }, { state: 'received' }, { waiting: 'paused' }, { payload: 'data.object.customer=cus_4242', since: '1d' }];
  for (const raw of searches) {
    expect(seqScans(await plan(raw)), JSON.stringify(raw)).toEqual([]);
  }
});
