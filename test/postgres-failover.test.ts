/**
 * A Postgres failover under a running stack, as a managed database does it: ingest and two
 * workers reach Postgres through an endpoint (a TcpProxy of the harness); a streaming replica
 * (pg_basebackup, a cluster of its own) follows the primary through a link the test can stall.
 * Mid-load, the primary dies (immediate stop), the replica is promoted and the endpoint moves
 * to it: every open connection is cut at once. The orders are the example shop's: a local step
 * (the payment on the order and its ledger entry) and two external calls (the receipt email,
 * the shipment) to the sandbox APIs, which apply a key once.
 *
 * Synchronous replication: a commit returns only once the replica has it. With the link
 * stalled, deliveries cannot commit: ingest answers 503 at its claim deadline and the provider
 * retries; after the failover every event answered 202 is on the new primary, none missing.
 *
 * Asynchronous replication: the last commits may never reach the replica. With the link
 * stalled, deliveries are answered 202 and handled on the old primary (their emails and
 * shipments sent); the failover loses their claims, runs and steps. The provider will not
 * redeliver what it saw acknowledged: `oncehook backfill stripe --all` lists the window's
 * events from Stripe's API and claims the missing ones; their runs call out again with the
 * SAME keys, so the downstream applies nothing new; their local steps were lost with the rest
 * and are applied once on the new primary. docs/reliability.md ("A Postgres failover") states
 * both guarantees with the figures.
 */
import { migrate } from '@oncehook/core';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import {
  createScratchDatabase,
  killAllServices,
  makeEvent,
  maxAppliedPerKey,
  STRIPE_SECRET,
  spawnService,
  startOwnPostgres,
  startOwnReplica,
  startSandbox,
  startTcpProxy,
  waitFor,
  type OwnPostgres,
  type OwnReplica,
  type SandboxHandle,
  type Service,
  type TcpProxy,
} from '@oncehook/harness';
import { SANDBOX_STRIPE_API_KEY } from '@oncehook/sandbox';
import { createPool, type Pool } from '@oncehook/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { T, testEnv, testPrefix } from './helpers/stack.js';

/**
 * Orders before the stall (A) and during it (B). `npm run failover` sets FAILOVER_ORDERS for a
 * larger run (docs/reliability.md); the suite runs 10 and 5.
 */
const A = Number(process.env.FAILOVER_ORDERS ?? 10);
const B = Math.max(1, Math.floor(A / 2));

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  await killAllServices();
  for (const step of cleanup.reverse()) await step().catch(() => {});
  cleanup = [];
});

interface Rig {
  primary: OwnPostgres;
  replica: OwnReplica;
  endpoint: TcpProxy;
  link: TcpProxy;
  sandbox: SandboxHandle;
  pool: Pool;
  env: Record<string, string>;
  services: Service[];
}

async function startRig(sync: boolean): Promise<Rig> {
  const primary = await startOwnPostgres();
  cleanup.push(() => primary.destroy());
  const link = await startTcpProxy(primary.port);
  cleanup.push(() => link.close());
  const replica = await startOwnReplica(primary, { linkPort: link.port, sync });
  cleanup.push(() => replica.destroy());
  const endpoint = await startTcpProxy(primary.port);
  cleanup.push(() => endpoint.close());
  const sandbox = await startSandbox();
  cleanup.push(() => sandbox.close());
  const database = await createScratchDatabase({ baseUrl: primary.baseUrl });
  const url = `postgres://postgres@127.0.0.1:${endpoint.port}/${database.name}`;
  const pool = createPool(url, { max: 2, connectionTimeoutMillis: 2_000 });
  pool.on('error', () => {}); // the failover cuts the test's own connections too
  cleanup.push(() => pool.end());
  await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  const env = testEnv({
    databaseUrl: url,
    prefix: testPrefix(),
    sandboxUrl: sandbox.url,
    extra: {
      // A claim the replica does not confirm is answered 503 after 1.5 s (the provider retries).
      CLAIM_TIMEOUT_MS: '1500',
      MAX_ATTEMPTS: '50',
      STRIPE_API_KEY: SANDBOX_STRIPE_API_KEY,
      STRIPE_API_BASE: sandbox.url,
    },
  });
  const ingest = spawnService('ingest', env);
  const workers = [spawnService('worker', env), spawnService('worker', env)];
  const ingestUrl = `http://127.0.0.1:${/listening on (\d+)/.exec(await ingest.waitFor(/listening on \d+/))![1]}`;
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
  await stripe(sandbox, '_endpoint', { url: `${ingestUrl}/webhooks/stripe`, secret: STRIPE_SECRET });
  return { primary, replica, endpoint, link, sandbox, pool, env, services: [ingest, ...workers] };
}

async function stripe(sandbox: SandboxHandle, route: string, body: unknown): Promise<Record<string, number>> {
  const response = await fetch(`${sandbox.url}/stripe/${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, number>;
}

/** Order payments (a local step, an email and a shipment each), ids evt_<run>_<n>. */
function orders(run: string, from: number, count: number): { id: string }[] {
  return Array.from({ length: count }, (_, i) => JSON.parse(makeEvent('stripe', from + i, run).body) as { id: string });
}

async function count(pool: Pool, sql: string, params: unknown[] = []): Promise<number> {
  return (await pool.query<{ n: number }>(sql, params)).rows[0]!.n;
}

const doneOf = (pool: Pool, run: string) => count(pool, `SELECT count(*)::int AS n FROM ${T.events} WHERE state = 'done' AND event_id LIKE $1`, [`evt_${run}_%`]);

/** The primary dies, the replica is promoted, the endpoint moves to it; returns the ms it took. */
async function failOver(rig: Rig): Promise<number> {
  const started = Date.now();
  await rig.primary.stop('immediate');
  await rig.replica.promote();
  rig.endpoint.pointAt(rig.replica.port);
  return Date.now() - started;
}

/** A query's answer once the new primary answers (the test's pool reconnects through the endpoint). */
async function afterFailover(query: () => Promise<number>): Promise<number> {
  const answer = await waitFor(
    async () =>
      query().then(
        (n) => ({ n }),
        () => null,
      ),
    { timeoutMs: 20_000, what: 'the new primary answering' },
  );
  return answer.n;
}

/** Everything answered: done once each, on the new primary, and no process died. */
async function expectExactlyOnce(rig: Rig, run: string, total: number): Promise<void> {
  await waitFor(async () => ((await doneOf(rig.pool, run).catch(() => -1)) === total ? true : null), {
    timeoutMs: 90_000,
    intervalMs: 250,
    what: `all ${total} orders done on the new primary`,
  });
  const { rows } = await rig.pool.query<{ orders: number; payments: number; entries: number }>(
    `SELECT (SELECT count(*)::int FROM example_orders WHERE id LIKE $1) AS orders,
            (SELECT coalesce(sum(payments), 0)::int FROM example_orders WHERE id LIKE $1) AS payments,
            (SELECT count(*)::int FROM ledger_entries WHERE source_event_id LIKE $1) AS entries`,
    [`order_evt_${run}_%`],
  );
  expect(rows[0]).toEqual({ orders: total, payments: total, entries: total });
  const stats = rig.sandbox.stats();
  for (const service of ['email', 'fulfilment'] as const) {
    expect(Object.keys(stats[service].appliedByKey), service).toHaveLength(total);
    expect(maxAppliedPerKey(stats[service]), service).toBe(1);
  }
  for (const service of rig.services) {
    expect(service.proc.exitCode, `${service.kind} exited: ${service.lines.slice(-8).join('\n')}`).toBeNull();
    expect(service.lines.filter((line) => /Unhandled|uncaught/i.test(line))).toEqual([]);
  }
}

describe('a Postgres failover (the endpoint moved to a promoted replica)', () => {
  it('synchronous replication: deliveries the replica cannot confirm are answered 503, never 202; after the failover every 202 is there, and every order is handled once', async () => {
    const rig = await startRig(true);
    const run = `fs${Date.now().toString(36)}`;
    expect(await stripe(rig.sandbox, '_events', { events: orders(run, 0, A) })).toMatchObject({ delivered: A });
    // The replica stops hearing from the primary: no commit can be confirmed.
    rig.link.stall();
    const stalled = orders(run, A, B);
    expect(await stripe(rig.sandbox, '_events', { events: stalled, deliver: false })).toMatchObject({ stored: B });
    const during = await stripe(rig.sandbox, '_redeliver', { ids: stalled.map((e) => e.id) });
    expect(during).toEqual({ attempted: B, delivered: 0 });
    const ms = await failOver(rig);
    // Every event the provider saw acknowledged is on the new primary, before any retry.
    const acknowledged = orders(run, 0, A).map((e) => e.id);
    expect(await afterFailover(() => count(rig.pool, `SELECT count(*)::int AS n FROM ${T.events} WHERE event_id = ANY($1::text[])`, [acknowledged]))).toBe(A);
    // The provider's retries of the 503s land on the new primary.
    await waitFor(async () => ((await stripe(rig.sandbox, '_redeliver', { ids: stalled.map((e) => e.id) })).delivered === B ? true : null), {
      timeoutMs: 30_000,
      intervalMs: 500,
      what: 'the retries of the 503s answered 202',
    });
    await expectExactlyOnce(rig, run, A + B);
    console.log(`[figure] failover (synchronous): ${A} acknowledged before the stall all on the new primary; ${B} answered 503 during it, retried after; failover ${ms} ms`);
  }, 180_000);

  it('asynchronous replication: the last acknowledged claims vanish with the old primary; `oncehook backfill --all` finds them in Stripe and each is handled once (the outbound keys absorb the repeated calls)', async () => {
    const rig = await startRig(false);
    const run = `fa${Date.now().toString(36)}`;
    expect(await stripe(rig.sandbox, '_events', { events: orders(run, 0, A) })).toMatchObject({ delivered: A });
    await waitFor(async () => ((await doneOf(rig.pool, run)) === A ? true : null), { timeoutMs: 60_000, what: `the first ${A} orders done` });
    // The replica has everything so far; then it stops hearing from the primary.
    await waitFor(
      async () => {
        const { rows } = await rig.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
        const replica = createPool(`${rig.replica.baseUrl}/postgres`, { max: 1 });
        try {
          const { rows: r } = await replica.query<{ behind: boolean }>('SELECT pg_last_wal_replay_lsn() < $1::pg_lsn AS behind', [rows[0]!.lsn]);
          return r[0]!.behind ? null : true;
        } finally {
          await replica.end();
        }
      },
      { timeoutMs: 20_000, what: 'the replica caught up' },
    );
    rig.link.stall();
    // Acknowledged on the primary alone, and mid-way through their handling (emails and
    // shipments sent for some, not yet for others) when it dies.
    expect(await stripe(rig.sandbox, '_events', { events: orders(run, A, B) })).toMatchObject({ delivered: B });
    const half = A + Math.ceil(B / 2);
    const doneAtFailover = await waitFor(
      async () => {
        const n = await doneOf(rig.pool, run);
        return n >= half ? n : null;
      },
      { timeoutMs: 60_000, what: `${half - A} of the unreplicated orders done on the old primary` },
    );
    const ms = await failOver(rig);

    // The new primary never heard of them.
    const present = await afterFailover(() => count(rig.pool, `SELECT count(*)::int AS n FROM ${T.events} WHERE event_id LIKE $1`, [`evt_${run}_%`]));
    expect(present).toBe(A);
    // The operator's command, as a process of the real entry point (the harness's `cli` service).
    const backfill = spawnService('cli', { ...rig.env, USER: 'failover-test' }, ['backfill', 'stripe', '--since', '1h', '--all', '--types', 'payment_intent.succeeded']);
    const { code } = await backfill.exited;
    const output = backfill.lines.join('\n');
    expect(code, output).toBe(0);
    expect(output).toContain(`listed ${A + B}, already known ${A}, new ${B} (claimed, dispatch enqueued)`);
    await expectExactlyOnce(rig, run, A + B);
    // Their emails and shipments were called again after the failover, with the keys of before.
    const replays = rig.sandbox.stats().email.replays;
    expect(replays).toBeGreaterThanOrEqual(doneAtFailover - A);
    console.log(
      `[figure] failover (asynchronous): ${B} acknowledged claims lost with the old primary, ${B} recovered by backfill --all; ${doneAtFailover - A} of them done on the old primary at its end; ${replays} repeated email calls answered from their keys; failover ${ms} ms`,
    );
  }, 180_000);
});
