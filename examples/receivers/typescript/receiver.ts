/**
 * A service of yours receiving Oncehook's destination calls (docs/destinations.md), in
 * TypeScript: verify with the official Standard Webhooks library, then apply the effect and
 * remember the `webhook-id` in ONE transaction, so a repeated call (Oncehook's retry after a
 * crash, a re-drive) is answered 200 and applies nothing.
 *
 *   npm install standardwebhooks pg
 *   WEBHOOK_SECRET=whsec_... DATABASE_URL=postgres://... PORT=4020 node receiver.js
 *
 * The tables (created here for the example; a migration of yours in real life):
 *   received_webhooks(webhook_id primary key): what was applied, by its key
 *   credits(...): the effect, here one row per Stripe payment
 */
import { createServer } from 'node:http';
import pg from 'pg';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

const webhook = new Webhook(process.env.WEBHOOK_SECRET ?? ''); // whsec_...: the destination's secret
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
pool.on('error', () => {});

await pool.query(`CREATE TABLE IF NOT EXISTS received_webhooks (webhook_id text PRIMARY KEY, type text NOT NULL, received_at timestamptz NOT NULL DEFAULT now());
  CREATE TABLE IF NOT EXISTS credits (event_id text NOT NULL, amount integer NOT NULL, webhook_id text NOT NULL REFERENCES received_webhooks)`);

interface Envelope {
  id: string;
  source: string;
  type: string;
  eventId: string;
  data: { data?: { object?: { amount?: number; amount_paid?: number; amount_received?: number } } };
}

/** The amount of a Stripe-shaped event: an invoice's amount_paid, a payment intent's amount_received, a charge's amount. */
function amountOf(envelope: Envelope): number {
  const object = envelope.data.data?.object ?? {};
  return object.amount_paid ?? object.amount_received ?? object.amount ?? 0;
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', async () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let envelope: Envelope;
    try {
      // Checks the signature (v1, HMAC) and the timestamp (within 5 minutes); throws otherwise.
      envelope = webhook.verify(body, req.headers as Record<string, string>) as Envelope;
    } catch (error) {
      res.writeHead(error instanceof WebhookVerificationError ? 401 : 400).end();
      return;
    }
    const id = String(req.headers['webhook-id']);
    let client: pg.PoolClient | undefined;
    let broken: Error | undefined;
    try {
      client = await pool.connect();
      // A checked-out client has no pool listener: if Postgres goes away mid-request (a restart,
      // a failover), its 'error' event would be unhandled and end this process. Note it, answer
      // 503 below, and release the client as broken so the pool discards it.
      client.on('error', (error: Error) => {
        broken = error;
      });
      await client.query('BEGIN');
      // The key first: a repeat finds it and applies nothing (a concurrent repeat waits on it).
      const first = await client.query('INSERT INTO received_webhooks (webhook_id, type) VALUES ($1, $2) ON CONFLICT DO NOTHING', [id, envelope.type]);
      if (first.rowCount === 1) {
        await client.query('INSERT INTO credits (event_id, amount, webhook_id) VALUES ($1, $2, $3)', [envelope.eventId, amountOf(envelope), id]);
      }
      await client.query('COMMIT');
      // One line per call: what it was, and whether it applied anything (a repeat applies nothing).
      console.log(
        `${envelope.type} ${envelope.eventId} (webhook-id ${id}): ${first.rowCount === 1 ? `applied: credited ${amountOf(envelope)}` : 'a repeat of that webhook-id: nothing applied'}`,
      );
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ applied: first.rowCount === 1 }));
    } catch (error) {
      broken ??= error as Error;
      await client?.query('ROLLBACK').catch(() => {});
      // The database did not answer: a 5xx, and Oncehook retries later with the same webhook-id.
      res.writeHead(503).end();
    } finally {
      client?.removeAllListeners('error');
      client?.release(broken);
    }
  });
  // A caller that goes away mid-request (Oncehook's worker killed, its timeout): nothing to answer.
  req.on('error', () => {});
});

server.listen(Number(process.env.PORT ?? 4020), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`receiver listening on ${typeof address === 'object' && address ? address.port : ''}\n`);
});
process.on('SIGTERM', () => server.close(() => pool.end().then(() => process.exit(0))));
