/**
 * Events as the pipeline leaves them, in bulk, for what must stay fast at size: the console's
 * search (`npm run bench:search`: 10 million; test/search-plans.test.ts: its query plans). Rows
 * `from..to` of a set of `total`, received in order over the last 35 days:
 *
 * - four sources (stripe 60%, github 20%, shopify 15%, linear 5%), 5 types each, a ~300-byte
 *   payload with a customer among 100,000 (`cus_<n>`), an amount, a currency, a description;
 * - one run each (stripe: `shop.payments`, the others: `send-receipt`): done, except 0.5%
 *   failed with one of five error shapes (ids and numbers varying), 1% received (half of them
 *   waiting on a pause), 0.5% processing under a lease.
 */
import type { EventFilter, Queries, Queryable } from '@oncehook/core';
import type { Pool } from '@oncehook/shared';

export const FILL_SOURCES = ['stripe', 'github', 'shopify', 'linear'] as const;

export async function fillEvents(pool: Pool, schema: string, range: { from: number; to: number; total: number }): Promise<void> {
  const S = schema;
  await pool.query(
    `INSERT INTO ${S}.events (provider, kind, event_id, type, payload, state, received_at, updated_at, finished_at, payload_bytes)
     SELECT src, src, src || '_' || g, src || '.' || (ARRAY['created', 'updated', 'paid', 'deleted', 'refunded'])[1 + (g / 7) % 5],
            jsonb_build_object('id', src || '_' || g, 'data', jsonb_build_object('object', jsonb_build_object(
              'customer', 'cus_' || (g % 100000), 'amount', (g % 9973) * 100, 'currency', (ARRAY['usd', 'eur', 'gbp', 'jpy'])[1 + g % 4],
              'description', 'order ' || g || ' for customer ' || (g % 100000) || ' shipped to warehouse ' || (g % 37)))),
            CASE WHEN g % 200 = 0 THEN 'failed' WHEN g % 100 = 1 THEN 'received' WHEN g % 200 = 3 THEN 'processing' ELSE 'done' END,
            at, at, CASE WHEN g % 200 IN (0, 1, 3) OR g % 100 = 1 THEN NULL ELSE at END, 300
       FROM generate_series($1::bigint, $2::bigint) g,
            LATERAL (SELECT CASE WHEN g % 20 < 12 THEN 'stripe' WHEN g % 20 < 16 THEN 'github' WHEN g % 20 < 19 THEN 'shopify' ELSE 'linear' END AS src,
                            now() - interval '35 days' + (g::float8 / $3::bigint) * interval '35 days' AS at) x`,
    [range.from, range.to, range.total],
  );
  await pool.query(
    `INSERT INTO ${S}.handler_runs (event_row_id, handler, state, attempts, last_error, error_shape, waiting, waiting_since, lease_token, lease_until, updated_at, finished_at)
     SELECT id, handler, state, attempts, message, ${S}.error_shape(message), waiting, waiting_since, lease_token, lease_until, updated_at, finished_at FROM (
     SELECT e.id, CASE WHEN e.provider = 'stripe' THEN 'shop.payments' ELSE 'send-receipt' END AS handler, e.state,
            CASE WHEN e.state = 'done' THEN 1 WHEN e.state = 'failed' THEN 10 ELSE 0 END AS attempts,
            CASE WHEN e.state = 'failed' THEN (ARRAY[
              'PermanentError: payment api 422: currency ' || (e.payload #>> '{data,object,currency}') || ' not supported for order ' || e.id,
              'PermanentError: customer cus_' || md5(e.id::text) || ' not found',
              'OutboundUnavailableError: email API answered 503 after 3 tries (request ' || gen_random_uuid() || ')',
              'TypeError: Cannot read properties of undefined (reading ''sku'') at line ' || (e.id % 300),
              'RetryLaterError: rate limited for ' || (e.id % 60) || ' s'])[1 + (e.id / 200) % 5] END AS message,
            CASE WHEN e.state = 'received' AND e.id % 200 = 1 THEN 'paused' END AS waiting,
            CASE WHEN e.state = 'received' AND e.id % 200 = 1 THEN e.received_at END AS waiting_since,
            CASE WHEN e.state = 'processing' THEN gen_random_uuid() END AS lease_token,
            CASE WHEN e.state = 'processing' THEN now() + interval '1 hour' END AS lease_until,
            e.updated_at, e.finished_at
       FROM ${S}.events e WHERE e.id BETWEEN $1::bigint AND $2::bigint) runs`,
    [range.from, range.to],
  );
}

/** One node of a query plan, flattened. */
export interface PlanStep {
  node: string;
  relation?: string;
  index?: string;
  indexCond?: string;
  filter?: string;
}

type PlanNode = { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; 'Index Cond'?: string; Filter?: string; Plans?: PlanNode[] };

/**
 * The plan Postgres chooses for the statement `call` sends that `isTarget` picks (EXPLAIN, not
 * run; the statements before it run), top-down.
 */
export async function planOf(pool: Pool, call: (db: Queryable) => Promise<unknown>, isTarget: (sql: string) => boolean): Promise<PlanStep[]> {
  const steps: PlanStep[] = [];
  const explaining = {
    query: async (text: string, params?: unknown[]) => {
      if (!isTarget(text)) return pool.query(text, params);
      const { rows } = await pool.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
      const walk = (node: PlanNode) => {
        steps.push({ node: node['Node Type'], relation: node['Relation Name'], index: node['Index Name'], indexCond: node['Index Cond'], filter: node.Filter });
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(rows[0]!['QUERY PLAN'][0]!.Plan);
      return { rows: [] };
    },
  } as unknown as Queryable;
  await call(explaining);
  return steps;
}

/** The plan of the search statement listEvents sends for `filter` (not the lookups before it). */
export const planOfSearch = (pool: Pool, queries: Queries, filter: EventFilter): Promise<PlanStep[]> =>
  planOf(
    pool,
    (db) => queries.listEvents(db, filter),
    (sql) => sql.includes('ORDER BY e.id DESC'),
  );
