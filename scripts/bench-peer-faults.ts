/**
 * `npm run bench:peer-faults -- [--events N] [--wait S] [--pipelines oncehook,graphile,bullmq,pgboss]`:
 * the same two crashes applied to Oncehook and to the pipelines a team would build instead
 * (scripts/bench/peers.ts), each with its defaults, and what each has done `--wait` seconds later.
 *
 * For each pipeline, on a database (and queue prefix) of its own, one ingest and one worker:
 *
 * 1. N wallet top-ups are delivered once each (50 connections); when a quarter are answered, the
 *    worker is killed with kill -9 (it is working: the load is still coming in) and started again;
 * 2. when half are answered, the ingest is killed with kill -9 (deliveries in flight get no
 *    answer), the load stops, and the ingest is started again;
 * 3. every event is delivered once more (the provider's retry of the unanswered ones, a
 *    duplicate of the others); then the script waits up to `--wait` seconds for every event to
 *    be done.
 *
 * Printed per pipeline: events claimed, done, still not done after the wait, ledger credits
 * (one per event is right: more is a double effect, fewer a lost one). Nothing is asserted:
 * what a pipeline lacks shows as events not done (a job lost between the claim and the queue,
 * or locked by the dead worker until its library's timeout).
 */
import { Redis } from 'ioredis';
import { parseScriptArgs, REDIS_URL, signStripe, spawnService, STRIPE_SECRET, type Service } from '@oncehook/harness';
import { createPool, type Pool } from '@oncehook/shared';
import { createTestDatabaseOn, releaseAll } from './bench/databases.js';
import { fire, listeningUrl, SHOP_ENV, topUp } from './bench/e2e.js';
import { QUEUE_PEERS } from './bench/peers.js';

type Pipeline = 'oncehook' | (typeof QUEUE_PEERS)[number];

const { values } = parseScriptArgs(import.meta.url, {
  options: {
    events: { type: 'string', default: '2000' },
    wait: { type: 'string', default: '120' },
    pipelines: { type: 'string', default: `oncehook,${QUEUE_PEERS.join(',')}` },
  },
});
const events = Number(values.events);
const waitSeconds = Number(values.wait);
const pipelines = values.pipelines.split(',').map((p) => p.trim()) as Pipeline[];
const unknown = pipelines.find((p) => p !== 'oncehook' && !(QUEUE_PEERS as readonly string[]).includes(p));
if (unknown !== undefined || !Number.isInteger(events) || events < 10 || !(waitSeconds > 0)) {
  process.stderr.write(`--pipelines takes oncehook,${QUEUE_PEERS.join(',')}; --events an integer >= 10; --wait seconds > 0\n`);
  process.exit(2);
}

const run = Math.random().toString(36).slice(2, 8);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Outcome {
  pipeline: Pipeline;
  claimed: number;
  done: number;
  /** Of those not done: a job still held by the dead worker (locked, active) / no job at all (lost between the claim and the queue). */
  held: number;
  noJob: number;
  credits: number;
  firstPassErrors: number;
}

async function measure(pipeline: Pipeline, services: Service[], pools: Pool[], databases: string[]): Promise<Outcome> {
  const db = await createTestDatabaseOn(`oncehook_bench_faults_${pipeline}_${run}`);
  databases.push(db.name);
  const base = {
    LOG_LEVEL: 'warn',
    DATABASE_URL: db.url,
    REDIS_URL,
    QUEUE_PREFIX: `bench-faults-${pipeline}-${run}`,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    PORT: '0',
    HOST: '127.0.0.1',
  };
  const workerEnv = {
    ...base,
    METRICS_PORT: '0',
    WORKER_CONCURRENCY: '16',
    ...SHOP_ENV,
  };
  if (pipeline !== 'oncehook') {
    const setup = spawnService('peer', base, [pipeline, 'setup']);
    if ((await setup.exited).code !== 0) throw new Error(`${pipeline} setup failed: ${setup.lines.slice(-5).join('\n')}`);
  }
  const start = (role: 'ingest' | 'worker'): Service => {
    const service =
      pipeline === 'oncehook' ? spawnService(role, role === 'worker' ? workerEnv : base) : spawnService('peer', role === 'worker' ? workerEnv : base, [pipeline, role]);
    services.push(service);
    return service;
  };
  const pool = createPool(db.url, { max: 1 });
  pools.push(pool);
  const table = pipeline === 'oncehook' ? 'oncehook.events' : 'peer_events';
  const count = async (sql: string) => (await pool.query<{ n: number }>(sql)).rows[0]?.n ?? 0;

  const deliveries = Array.from({ length: events }, (_, n) => topUp(`evt_fault_${pipeline}_${run}_${n}`, n));
  let ingest = start('ingest');
  let worker = start('worker');
  await worker.waitFor(/worker ready/);
  // 1. kill -9 of the worker when a quarter of the deliveries are answered (it is working: the
  //    load is still coming in), started again at once; 2. kill -9 of the ingest at half, and
  //    the load stops with it (what it had not sent yet is redelivered in 3, as a provider would).
  let workerKilled: Promise<void> | null = null;
  let ingestKilled: Promise<void> | null = null;
  const first = fire(await listeningUrl(ingest), deliveries, {
    onResponse: (answered) => {
      if (answered >= events / 4 && workerKilled === null)
        workerKilled = worker.kill9().then(async () => {
          worker = start('worker');
          await worker.waitFor(/worker ready/);
        });
      if (answered >= events / 2 && ingestKilled === null) {
        ingestKilled = ingest.kill9();
        first.stop();
      }
    },
  });
  const firstResult = await first.done;
  await ingestKilled;
  await workerKilled;
  ingest = start('ingest');
  const url = await listeningUrl(ingest);
  // 3. the provider's retry: every event once more.
  await fire(
    url,
    deliveries.map((d) => signStripe(JSON.parse(d.body))),
  ).done;
  const deadline = Date.now() + waitSeconds * 1000;
  while (Date.now() < deadline && (await count(`SELECT count(*)::int AS n FROM ${table} WHERE state = 'done'`)) < events) await sleep(250);
  // Why an event is not done: its job is held by the dead worker, or there is no job at all.
  const notDone = (await pool.query<{ id: string }>(`SELECT event_id AS id FROM ${table} WHERE state <> 'done'`)).rows.map((r) => r.id);
  let held = 0;
  let noJob = 0;
  if (pipeline === 'graphile') {
    held = await count(`SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE key = ANY('{${notDone.join(',')}}'::text[]) AND locked_at IS NOT NULL`);
    noJob = notDone.length - (await count(`SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE key = ANY('{${notDone.join(',')}}'::text[])`));
  } else if (pipeline === 'pgboss') {
    held = await count(`SELECT count(*)::int AS n FROM pgboss.job WHERE singleton_key = ANY('{${notDone.join(',')}}'::text[]) AND state = 'active'`);
    noJob = notDone.length - (await count(`SELECT count(*)::int AS n FROM pgboss.job WHERE singleton_key = ANY('{${notDone.join(',')}}'::text[])`));
  } else if (pipeline === 'bullmq') {
    const redis = new Redis(REDIS_URL);
    for (const id of notDone) {
      const [state] = await redis.hmget(`${base.QUEUE_PREFIX}:topup:${id}`, 'processedOn');
      const exists = await redis.exists(`${base.QUEUE_PREFIX}:topup:${id}`);
      if (!exists) noJob += 1;
      else if (state) held += 1;
    }
    redis.disconnect();
  }
  const outcome: Outcome = {
    pipeline,
    held,
    noJob,
    claimed: await count(`SELECT count(*)::int AS n FROM ${table}`),
    done: await count(`SELECT count(*)::int AS n FROM ${table} WHERE state = 'done'`),
    credits: await count('SELECT count(*)::int AS n FROM ledger_entries'),
    firstPassErrors: firstResult.errors + firstResult.timeouts,
  };
  await Promise.all([ingest.kill9(), worker.kill9()]);
  return outcome;
}

const services: Service[] = [];
const pools: Pool[] = [];
const databases: string[] = [];
const outcomes: Outcome[] = [];
try {
  for (const pipeline of pipelines) {
    process.stdout.write(`${pipeline}: ${events} events, ingest and worker killed with kill -9, every event redelivered, then up to ${waitSeconds} s...\n`);
    outcomes.push(await measure(pipeline, services, pools, databases));
  }
} finally {
  await releaseAll({ services, pools, databases });
}
const names: Record<Pipeline, string> = { oncehook: 'Oncehook', graphile: 'graphile-worker', bullmq: 'BullMQ alone', pgboss: 'pg-boss' };
process.stdout.write(`\nAfter an ingest and a worker kill -9 and one redelivery of every event, waited up to ${waitSeconds} s (${events} events)\n`);
process.stdout.write('pipeline        | claimed | done | not done: job held by the dead worker, no job | ledger credits | unanswered in the kill\n');
for (const o of outcomes)
  process.stdout.write(
    `${names[o.pipeline].padEnd(15)} | ${String(o.claimed).padStart(7)} | ${String(o.done).padStart(4)} | ${`${events - o.done}: ${o.held}, ${o.noJob}`.padStart(44)} | ${String(o.credits).padStart(14)} | ${o.firstPassErrors}\n`,
  );
process.exit(0);
