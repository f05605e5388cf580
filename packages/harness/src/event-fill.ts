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
    `INSERT INTO ${S}.handler_runs (event_row_id, handler, state, attempts, last_error, waiting, waiting_since, lease_token, lease_until, updated_at, finished_at)
     SELECT e.id, CASE WHEN e.provider = 'stripe' THEN 'shop.payments' ELSE 'send-receipt' END, e.state,
            CASE WHEN e.state = 'done' THEN 1 WHEN e.state = 'failed' THEN 10 ELSE 0 END,
            CASE WHEN e.state = 'failed' THEN (ARRAY[
              'PermanentError: payment api 422: currency ' || (e.payload #>> '{data,object,currency}') || ' not supported for order ' || e.id,
              'PermanentError: customer cus_' || md5(e.id::text) || ' not found',
              'OutboundUnavailableError: email API answered 503 after 3 tries (request ' || gen_random_uuid() || ')',
              'TypeError: Cannot read properties of undefined (reading ''sku'') at line ' || (e.id % 300),
              'RetryLaterError: rate limited for ' || (e.id % 60) || ' s'])[1 + (e.id / 200) % 5] END,
            CASE WHEN e.state = 'received' AND e.id % 200 = 1 THEN 'paused' END,
            CASE WHEN e.state = 'received' AND e.id % 200 = 1 THEN e.received_at END,
            CASE WHEN e.state = 'processing' THEN gen_random_uuid() END,
            CASE WHEN e.state = 'processing' THEN now() + interval '1 hour' END,
            e.updated_at, e.finished_at
       FROM ${S}.events e WHERE e.id BETWEEN $1::bigint AND $2::bigint`,
    [range.from, range.to],
  );
}
