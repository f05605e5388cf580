/**
 * The pipelines a team would build instead of Oncehook, for the bench's peer rows
 * (`npm run bench -- --peers graphile,bullmq,pgboss,inline`). Each does the same work as Oncehook's
 * end-to-end run (the example shop's wallet top-up), with libraries a team already knows:
 *
 *   ingest: Hono on @hono/node-server, Stripe's own SDK to verify (`constructEvent`), a claim
 *           `INSERT INTO peer_events ... ON CONFLICT (event_id) DO NOTHING`, then the job;
 *   worker: one transaction that marks the event done only if it is not (the guard that makes
 *           a retried job harmless for a LOCAL write) and, if it did, runs the top-up's three
 *           ledger statements (`creditLedger` of the example shop).
 *
 * Peers, by how the job is added:
 *   graphile - graphile-worker; the claim and `graphile_worker.add_job(..., job_key := id)` in
 *              ONE statement (a CTE), so the claim and the job commit together;
 *   bullmq   - BullMQ on Redis, `jobId` = the event id, added after the claim commits;
 *   pgboss   - pg-boss, `singletonKey` = the event id, sent after the claim commits;
 *   inline   - no queue at all, THE FLOOR: the ingest claims and runs the top-up in one
 *              transaction before it answers (it has no worker process). Not a pipeline
 *              to deploy (a slow or failing handler holds or fails the provider's request, and
 *              the provider's retries are the only retry), but the least CPU any pipeline can
 *              spend on this work on this box: the bench's other rows are read against it.
 *
 * What none of them has (the bench's docs list it): a run fence, recorded external steps and
 * outbound idempotency keys, a reconciler for a job lost between the claim and the queue
 * (bullmq, pgboss) or a queue emptied, give-up and redrive, flow control, the delivery log.
 *
 * `node ... scripts/bench/peers.ts <graphile|bullmq|pgboss|inline> <setup|ingest|worker>` with
 * DATABASE_URL, REDIS_URL (bullmq), QUEUE_PREFIX (bullmq), STRIPE_WEBHOOK_SECRET, PORT=0.
 * setup creates the peer's table (and the library's schema) and exits; ingest prints
 * `listening on <port>`; worker prints `worker ready` (inline has none).
 */
import path from 'node:path';
import { serve } from '@hono/node-server';
import { Queue, Worker } from 'bullmq';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import PgBoss from 'pg-boss';
import pg from 'pg';
import Stripe from 'stripe';
import { run as runGraphile, runMigrations as migrateGraphile } from 'graphile-worker';

/** The peers that put a queue between the claim and the work (bench:peer-faults crashes these). */
export const QUEUE_PEERS = ['graphile', 'bullmq', 'pgboss'] as const;
export const PEERS = [...QUEUE_PEERS, 'inline'] as const;
export type Peer = (typeof PEERS)[number];

interface TopUp {
  id: string;
  customer: string;
  amount: number;
  currency: string;
}

const TABLE = `CREATE TABLE IF NOT EXISTS peer_events (
  event_id    text PRIMARY KEY,
  type        text NOT NULL,
  payload     jsonb NOT NULL,
  state       text NOT NULL DEFAULT 'received',
  received_at timestamptz NOT NULL DEFAULT now(),
  done_at     timestamptz
)`;

/** The claim (one row per event id). */
const CLAIM = `INSERT INTO peer_events (event_id, type, payload) VALUES ($1, $2, $3::jsonb) ON CONFLICT (event_id) DO NOTHING RETURNING event_id`;

/** The inline floor's claim: the event is stored done, in the transaction of its top-up. */
const CLAIM_DONE = `INSERT INTO peer_events (event_id, type, payload, state, done_at) VALUES ($1, $2, $3::jsonb, 'done', now()) ON CONFLICT (event_id) DO NOTHING RETURNING event_id`;

/** `work` in one transaction: BEGIN, work, COMMIT (ROLLBACK when it throws); returns what `work` returned. */
async function inTransaction<T>(client: pg.PoolClient | pg.Client, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** The example shop's three ledger statements (`creditLedger`). */
async function credit(client: pg.PoolClient | pg.Client, job: TopUp): Promise<void> {
  await client.query('INSERT INTO ledger_accounts (id, balance_cents) VALUES ($1::text, 0) ON CONFLICT (id) DO NOTHING', [job.customer]);
  await client.query('UPDATE ledger_accounts SET balance_cents = balance_cents + $2::bigint, updated_at = now() WHERE id = $1::text', [job.customer, job.amount]);
  await client.query(
    `INSERT INTO ledger_entries (account_id, amount_cents, currency, source_provider, source_event_id) VALUES ($1::text, $2::bigint, $3::text, 'example', $4::text) RETURNING id`,
    [job.customer, job.amount, job.currency, job.id],
  );
}

/** The top-up: the guard, then the ledger statements, in one transaction. */
async function topUp(client: pg.PoolClient | pg.Client, job: TopUp): Promise<void> {
  await inTransaction(client, async () => {
    const { rowCount } = await client.query(`UPDATE peer_events SET state = 'done', done_at = now() WHERE event_id = $1 AND state <> 'done'`, [job.id]);
    if (rowCount === 1) await credit(client, job);
  });
}

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

/** Hono + Stripe's SDK verification; `claim` stores the event and queues its job, true when new. */
function serveIngest(claim: (event: Stripe.Event, raw: string, job: TopUp) => Promise<boolean>): void {
  const stripe = new Stripe('sk_test_peer');
  const secret = env('STRIPE_WEBHOOK_SECRET');
  const app = new Hono();
  app.post('/webhooks/stripe', async (c) => {
    const raw = await c.req.text();
    let event: Stripe.Event;
    try {
      event = stripe.webhooks.constructEvent(raw, c.req.header('stripe-signature') ?? '', secret);
    } catch {
      return c.json({ error: 'bad signature' }, 400);
    }
    const intent = event.data.object as { customer?: string; amount_received?: number; currency?: string };
    const job: TopUp = { id: event.id, customer: String(intent.customer), amount: Number(intent.amount_received), currency: String(intent.currency) };
    const fresh = await claim(event, raw, job);
    return c.json({ status: fresh ? 'accepted' : 'duplicate' }, fresh ? 202 : 200);
  });
  serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' }, (info) => process.stdout.write(`listening on ${info.port}\n`));
}

// Idle connections are kept (as Oncehook's pools keep theirs 30 s): the bench reads each
// backend's CPU from /proc, and a backend that closes mid-run takes its CPU with it.
const IDLE_MS = 120_000;
const pool = () => new pg.Pool({ connectionString: env('DATABASE_URL'), max: Number(process.env.DATABASE_POOL_SIZE ?? 10), idleTimeoutMillis: IDLE_MS });

async function main(peer: Peer, role: string): Promise<void> {
  if (role === 'setup') {
    const client = new pg.Client({ connectionString: env('DATABASE_URL') });
    await client.connect();
    await client.query(TABLE);
    await client.end();
    if (peer === 'graphile') await migrateGraphile({ connectionString: env('DATABASE_URL') });
    if (peer === 'pgboss') {
      const boss = new PgBoss({ connectionString: env('DATABASE_URL'), max: 1 });
      await boss.start();
      await boss.createQueue('topup');
      await boss.stop({ graceful: false, wait: true });
    }
    return;
  }
  const concurrency = Number(process.env.WORKER_CONCURRENCY ?? 16);
  if (peer === 'inline') {
    if (role === 'ingest') {
      const db = pool();
      // A duplicate delivered at once waits on the first one's claim (the unique index) and
      // finds it committed: DO NOTHING, no credit.
      serveIngest(async (event, raw, job) => {
        const client = await db.connect();
        try {
          return await inTransaction(client, async () => {
            const fresh = (await client.query(CLAIM_DONE, [event.id, event.type, raw])).rowCount === 1;
            if (fresh) await credit(client, job);
            return fresh;
          });
        } finally {
          client.release();
        }
      });
    } else throw new Error('the inline floor has no worker: its ingest does the work');
    return;
  }
  if (peer === 'graphile') {
    if (role === 'ingest') {
      const db = pool();
      // The claim and the job in one statement: both commit or neither (graphile-worker's
      // jobs live in the same database). job_key dedupes the job too.
      serveIngest(async (event, raw, job) => {
        const { rowCount } = await db.query(`WITH claimed AS (${CLAIM}) SELECT graphile_worker.add_job('topup', $4::json, job_key := event_id) FROM claimed`, [
          event.id,
          event.type,
          raw,
          JSON.stringify(job),
        ]);
        return rowCount === 1;
      });
    } else {
      const runner = await runGraphile({
        pgPool: new pg.Pool({ connectionString: env('DATABASE_URL'), max: concurrency + 2, idleTimeoutMillis: IDLE_MS }),
        concurrency,
        noHandleSignals: false,
        pollInterval: 1000,
        taskList: { topup: async (payload, helpers) => helpers.withPgClient((client) => topUp(client as pg.PoolClient, payload as TopUp)) },
      });
      process.stdout.write('worker ready\n');
      await runner.promise;
    }
    return;
  }
  if (peer === 'bullmq') {
    const connection = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null });
    const prefix = env('QUEUE_PREFIX');
    if (role === 'ingest') {
      const db = pool();
      const queue = new Queue<TopUp>('topup', { connection, prefix, defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000, attempts: 5 } });
      // After the claim commits: a crash in between loses the job (nothing re-adds it).
      serveIngest(async (event, raw, job) => {
        const { rowCount } = await db.query(CLAIM, [event.id, event.type, raw]);
        if (rowCount === 1) await queue.add('topup', job, { jobId: event.id });
        return rowCount === 1;
      });
    } else {
      const db = pool();
      new Worker<TopUp>(
        'topup',
        async (bullJob) => {
          const client = await db.connect();
          try {
            await topUp(client, bullJob.data);
          } finally {
            client.release();
          }
        },
        { connection, prefix, concurrency },
      );
      process.stdout.write('worker ready\n');
    }
    return;
  }
  const boss = new PgBoss({ connectionString: env('DATABASE_URL'), max: role === 'ingest' ? 10 : concurrency + 2, idleTimeoutMillis: IDLE_MS } as PgBoss.ConstructorOptions);
  boss.on('error', (error) => process.stderr.write(`pg-boss: ${error}\n`));
  await boss.start();
  if (role === 'ingest') {
    const db = pool();
    // After the claim commits, as with BullMQ.
    serveIngest(async (event, raw, job) => {
      const { rowCount } = await db.query(CLAIM, [event.id, event.type, raw]);
      if (rowCount === 1) await boss.send('topup', job, { singletonKey: event.id, retryLimit: 5 });
      return rowCount === 1;
    });
  } else {
    const db = pool();
    // pg-boss 10 has no local concurrency, and a poller waits its interval (0.5 s at least)
    // after every fetch, whatever it found: a poller carries batchSize / 0.5 s jobs. So
    // `concurrency` pollers of 8 jobs each (up to 256 jobs/s per process), a batch's jobs run
    // together (it completes when all have; a failed one fails the batch, whose retry the guard
    // in topUp makes harmless for the others).
    for (let i = 0; i < concurrency; i += 1)
      await boss.work<TopUp>('topup', { batchSize: 8, pollingIntervalSeconds: 0.5 }, async (jobs) => {
        await Promise.all(
          jobs.map(async (job) => {
            const client = await db.connect();
            try {
              await topUp(client, job.data);
            } finally {
              client.release();
            }
          }),
        );
      });
    process.stdout.write('worker ready\n');
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) {
  const [peer, role] = process.argv.slice(2) as [Peer, string];
  if (!PEERS.includes(peer) || !['setup', 'ingest', 'worker'].includes(role)) {
    process.stderr.write(`usage: peers.ts <${PEERS.join('|')}> <setup|ingest|worker>\n`);
    process.exit(2);
  }
  await main(peer, role);
}
