/**
 * Bench ceiling (b): Hono + Stripe signature verification + JSON parse, no database, no
 * queue. What the edge costs before it stores anything. Prints `listening on <port>`.
 */
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { VerificationError } from '@oncehook/shared';
import { createStripeSource } from '@oncehook/providers';

const source = createStripeSource({ secrets: [process.env.STRIPE_WEBHOOK_SECRET ?? ''] });
const app = new Hono();
app.post('/webhooks/:provider', async (c) => {
  const rawBody = Buffer.from(await c.req.arrayBuffer());
  try {
    const verified = source.verify({ rawBody, header: (name) => c.req.header(name) ?? null, now: new Date() });
    return c.json({ status: 'verified', id: 'event' in verified ? verified.event.eventId : null }, 200);
  } catch (error) {
    if (error instanceof VerificationError) return c.json({ error: error.reason }, error.status);
    throw error;
  }
});
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => process.stdout.write(`listening on ${info.port}\n`));
