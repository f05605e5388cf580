/**
 * Bench baseline (a): a naive but correct receiver. Hono + one
 * `INSERT ... ON CONFLICT (provider, event_id) DO NOTHING` per request. No signature check,
 * no enqueue, no batching. Prints `listening on <port>`.
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { createPool } from '@oncehook/shared';

const pool = createPool(process.env.DATABASE_URL ?? '', { max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const app = new Hono();
app.post('/webhooks/:provider', async (c) => {
  const text = await c.req.text();
  const body = JSON.parse(text) as { id: string; type: string };
  const { rowCount } = await pool.query(
    `INSERT INTO oncehook.events (provider, kind, event_id, type, payload) VALUES ($1::text, 'stripe', $2::text, $3::text, $4::jsonb)
     ON CONFLICT (provider, event_id) DO NOTHING`,
    [c.req.param('provider'), body.id, body.type, text],
  );
  return c.json({ status: rowCount === 1 ? 'accepted' : 'duplicate' }, rowCount === 1 ? 202 : 200);
});
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => process.stdout.write(`listening on ${info.port}\n`));
