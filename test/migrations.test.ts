/**
 * Migrations: numbered, applied once, safe to run twice and from several processes at once;
 * Oncehook's tables in their own schema, the example's only when asked for; a database from
 * before the schema existed upgraded in place, with the keys of its in-flight events unchanged.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { createScratchDatabase, dumpDatabaseSchema, ROOT, spawnService, startSandbox } from '@oncehook/harness';
import { defineHandler } from '@oncehook/sdk';
import { createPool, type Pool } from '@oncehook/shared';
import { createQueries, loadMigrations, migrate } from '@oncehook/core';
import { processJob } from '@oncehook/core';
import { afterAll, expect, it } from 'vitest';
import { z } from 'zod';
import { engine, exampleHandlers } from './helpers/stack.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function emptyDatabase() {
  const database = await createScratchDatabase();
  cleanups.push(database.drop);
  return database;
}

async function withPool<T>(url: string, fn: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = createPool(url, { max: 2 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

async function tablesBySchema(pool: Pool): Promise<Record<string, string[]>> {
  const { rows } = await pool.query<{ schema: string; table: string }>(
    `SELECT table_schema AS schema, table_name AS table FROM information_schema.tables
      WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`,
  );
  const out: Record<string, string[]> = {};
  for (const row of rows) out[row.schema] = [...(out[row.schema] ?? []), row.table];
  return out;
}

it('runs concurrently from three processes without error, then again as a no-op', async () => {
  const database = await emptyDatabase();
  const runs = [1, 2, 3].map(() => spawnService('migrate', { DATABASE_URL: database.url }));
  const exits = await Promise.all(runs.map((r) => r.exited));
  expect(exits.map((e) => e.code)).toEqual([0, 0, 0]);
  // Exactly one of them applied the migrations; the others found the schema up to date.
  expect(runs.filter((r) => r.lines.some((l) => /applied \d+ migration/.test(l)))).toHaveLength(1);
  expect(runs.filter((r) => r.lines.some((l) => /schema up to date/.test(l)))).toHaveLength(2);

  await withPool(database.url, async (pool) => {
    expect(await migrate(pool)).toEqual({ applied: [], upgradedLegacy: false });
    const { rows } = await pool.query<{ name: string }>(`SELECT name FROM oncehook.migrations WHERE set_name = 'oncehook' ORDER BY version`);
    expect(rows.map((r) => r.name)).toEqual((await loadMigrations()).map((m) => m.name));
  });
});

it('creates a missing database (npm run migrate on a fresh machine)', async () => {
  const database = await emptyDatabase();
  const url = database.url.replace(/oncehook_empty_\w+$/, `${database.name}_fresh`);
  const run = spawnService('migrate', { DATABASE_URL: url });
  expect((await run.exited).code).toBe(0);
  expect(run.lines.some((l) => l.includes('created database'))).toBe(true);
  await withPool(url.replace(/\/[^/]+$/, '/postgres'), (pool) => pool.query(`DROP DATABASE ${database.name}_fresh WITH (FORCE)`));
});

it('without the example named, npm run migrate creates no example table, and every framework table is in the oncehook schema', async () => {
  const database = await emptyDatabase();
  const run = spawnService('migrate', { DATABASE_URL: database.url });
  expect((await run.exited).code).toBe(0);
  await withPool(database.url, async (pool) => {
    expect(await tablesBySchema(pool)).toEqual({
      oncehook: [
        'activity',
        'attempt_history',
        'backfill_schedule',
        'deliveries',
        'delivery_counts',
        'events',
        'failure_groups',
        'handler_health',
        'handler_runs',
        'handler_workers',
        'handlers',
        'migrations',
        'object_versions',
        'operator_actions',
        'pauses',
        'rate_windows',
        'run_attempts',
        'steps',
      ],
    });
  });

  // The example's own set, asked for explicitly, adds its tables where the application's live.
  const shop = spawnService('migrate', { DATABASE_URL: database.url }, ['--set', 'shop', '--dir', 'examples/shop/migrations']);
  expect((await shop.exited).code).toBe(0);
  expect(shop.lines.join('\n')).toMatch(/applied 1 migration\(s\): shop\/0001_shop.sql/);
  await withPool(database.url, async (pool) => {
    expect((await tablesBySchema(pool)).public).toEqual(['example_customers', 'example_orders', 'ledger_accounts', 'ledger_entries']);
  });
});

it('ONCEHOOK_SCHEMA puts the tables in another schema, and the pipeline runs there', async () => {
  const database = await emptyDatabase();
  await withPool(database.url, async (pool) => {
    await migrate(pool, { schema: 'billing_hooks' });
    expect(Object.keys(await tablesBySchema(pool))).toEqual(['billing_hooks']);
    const queries = createQueries('billing_hooks');
    const claim = await queries.claimEvent(pool, { source: 'svc', kind: 'hmac', eventId: 'e1', type: 'thing.happened', signedAt: null, rawBody: '{}', payload: {}, meta: {} });
    if (claim.outcome !== 'new') throw new Error('expected new');
    let ran = 0;
    const handler = defineHandler({ name: 'things', source: 'svc', type: 'thing.happened', payload: z.object({}) }, async (_event, ctx) => {
      await ctx.transaction('count', async () => ++ran, { final: true });
    });
    const outcome = await processJob(engine(pool, [handler], {}, { schema: 'billing_hooks' }), { rowId: claim.rowId, source: 'svc', eventId: 'e1', attempt: 0 });
    expect(outcome).toMatchObject({ runs: [{ kind: 'done' }] });
    expect((await queries.getEvent(pool, claim.rowId))?.state).toBe('done');
    expect(ran).toBe(1);
  });
});

/** The key the code before handler names sent: sha256(provider NUL eventId NUL step NUL generation). */
function legacyKey(provider: string, eventId: string, step: string, generation: number): string {
  return `oncehook-${createHash('sha256').update(`${provider}\0${eventId}\0${step}\0${generation}`).digest('hex').slice(0, 48)}`;
}

it('upgrades a database from before the schema: tables moved, data kept, in-flight events keep their keys', async () => {
  const database = await emptyDatabase();
  const sandbox = await startSandbox();
  cleanups.push(sandbox.close);
  await withPool(database.url, async (pool) => {
    // The database as the previous release left it: tables in public, tracked in public.oncehook_migrations.
    const legacyDir = path.join(ROOT, 'packages/core/src/legacy');
    await pool.query('CREATE TABLE oncehook_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())');
    for (const file of (await readdir(legacyDir)).sort()) {
      await pool.query(await readFile(path.join(legacyDir, file), 'utf8'));
      await pool.query('INSERT INTO oncehook_migrations (version, name) VALUES ($1, $2)', [Number(file.slice(0, 4)), file]);
    }
    const insert = async (eventId: string, type: string, payload: unknown, state: string, attempts: number, extra = '') => {
      const { rows } = await pool.query<{ id: number }>(
        `INSERT INTO webhook_events (provider, kind, event_id, type, payload, state, attempts${extra ? ', lease_token, lease_until' : ''})
         VALUES ($1, $2, $3, $4, $5, $6, $7${extra}) RETURNING id`,
        ['standard-webhooks', 'standard-webhooks', eventId, type, JSON.stringify(payload), state, attempts],
      );
      return rows[0]!.id;
    };
    const renewal = (n: number) => ({ type: 'subscription.renewed', data: { subscription_id: `sub_${n}`, customer_id: `cus_${n}`, amount: 1000, currency: 'usd' } });
    // Finished, with its steps.
    const done = await insert('msg_done', 'subscription.renewed', renewal(1), 'done', 1);
    await pool.query(`INSERT INTO webhook_event_steps (event_row_id, generation, name, result) VALUES ($1, 0, 'charge', '{"id":"ch_old"}'), ($1, 0, 'record-renewal', '{}')`, [
      done,
    ]);
    // In flight: attempt 1 called the payment API and died before recording it; waiting for attempt 2.
    const inFlight = await insert('msg_in_flight', 'subscription.renewed', renewal(2), 'received', 1);
    // Never attempted, a dead letter, and one leased by a worker that was stopped for the upgrade.
    await insert('msg_new', 'subscription.renewed', renewal(3), 'received', 0);
    await insert('msg_failed', 'subscription.renewed', renewal(4), 'failed', 10);
    await insert('msg_leased', 'subscription.renewed', renewal(5), 'processing', 1, `, '${randomUUID()}', now() - interval '1 minute'`);
    await pool.query(`INSERT INTO ledger_accounts (id, balance_cents) VALUES ('cus_1', 1000)`);

    const result = await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
    expect(result).toEqual({
      applied: [
        'oncehook/0001_schema.sql',
        'oncehook/0002_body_hash_and_handlers.sql',
        'oncehook/0003_deliveries_and_attempts.sql',
        'oncehook/0004_object_versions.sql',
        'oncehook/0005_trace_parent.sql',
        'oncehook/0006_key_horizon.sql',
        'oncehook/0007_object_versions_previous.sql',
        'oncehook/0008_payload_bytes.sql',
        'oncehook/0009_delivery_counts.sql',
        'oncehook/0010_flow_control.sql',
        'oncehook/0011_flow_handoff.sql',
        'oncehook/0012_failure_groups.sql',
        'oncehook/0013_activity.sql',
        'oncehook/0014_flow_gate.sql',
        'oncehook/0015_event_origin.sql',
        'oncehook/0016_backfill_schedule.sql',
        'oncehook/0017_lease_lost.sql',
        'oncehook/0018_error_shape_ids_and_statuses.sql',
        'oncehook/0019_attempt_rows_on_end.sql',
        'oncehook/0020_delivery_counts_past_the_log.sql',
        'oncehook/0021_leased_steps.sql',
        'shop/0001_shop.sql',
      ],
      upgradedLegacy: true,
    });
    const tables = await tablesBySchema(pool);
    expect(tables.oncehook).toEqual([
      'activity',
      'attempt_history',
      'backfill_schedule',
      'deliveries',
      'delivery_counts',
      'events',
      'failure_groups',
      'handler_health',
      'handler_runs',
      'handler_workers',
      'handlers',
      'migrations',
      'object_versions',
      'operator_actions',
      'pauses',
      'rate_windows',
      'run_attempts',
      'steps',
    ]);
    expect(tables.public).toEqual(['example_customers', 'example_orders', 'ledger_accounts', 'ledger_entries']); // the example's, kept with their data
    expect((await pool.query(`SELECT balance_cents::int AS b FROM ledger_accounts`)).rows).toEqual([{ b: 1000 }]);

    const queries = createQueries('oncehook');
    const events = await pool.query<{ event_id: string; state: string; runs_pending: number; runs_failed: number }>(
      `SELECT event_id, state, runs_pending, runs_failed FROM oncehook.events ORDER BY id`,
    );
    expect(events.rows).toEqual([
      { event_id: 'msg_done', state: 'done', runs_pending: 0, runs_failed: 0 },
      { event_id: 'msg_in_flight', state: 'processing', runs_pending: 1, runs_failed: 0 },
      { event_id: 'msg_new', state: 'received', runs_pending: 0, runs_failed: 0 },
      { event_id: 'msg_failed', state: 'failed', runs_pending: 0, runs_failed: 1 },
      { event_id: 'msg_leased', state: 'processing', runs_pending: 1, runs_failed: 0 },
    ]);
    const runs = await pool.query<{ handler: string; state: string; attempts: number; key_scheme: number }>(
      `SELECT handler, state, attempts, key_scheme FROM oncehook.handler_runs ORDER BY event_row_id`,
    );
    expect(runs.rows).toEqual([
      { handler: '', state: 'done', attempts: 1, key_scheme: 1 },
      { handler: '', state: 'received', attempts: 1, key_scheme: 1 },
      { handler: '', state: 'failed', attempts: 10, key_scheme: 1 },
      { handler: '', state: 'processing', attempts: 1, key_scheme: 1 },
    ]);
    expect((await queries.showEvent(pool, done))?.steps.map((s) => s.name)).toEqual(['charge', 'record-renewal']);

    // The in-flight renewal resumes with today's handler: its charge is sent with the SAME key
    // the old code sent, so the payment API (which applied attempt 1) applies nothing new.
    const deps = engine(pool, exampleHandlers(sandbox.url));
    const outcome = await processJob(deps, { rowId: inFlight, source: 'standard-webhooks', eventId: 'msg_in_flight', attempt: 0 });
    expect(outcome).toMatchObject({ runs: [{ kind: 'done', handler: 'shop.renewals' }] });
    expect(sandbox.stats().payment.requestKeys).toEqual([legacyKey('standard-webhooks', 'msg_in_flight', 'charge', 0)]);
    expect((await queries.getRuns(pool, inFlight))[0]).toMatchObject({ handler: 'shop.renewals', state: 'done', attempts: 2, keyScheme: 1 });

    // An event never attempted is dispatched like a new one: new-style keys.
    const fresh = await pool.query<{ id: number }>(`SELECT id FROM oncehook.events WHERE event_id = 'msg_new'`);
    await processJob(deps, { rowId: fresh.rows[0]!.id, source: 'standard-webhooks', eventId: 'msg_new', attempt: 0 });
    expect((await queries.getRuns(pool, fresh.rows[0]!.id))[0]).toMatchObject({ handler: 'shop.renewals', state: 'done', keyScheme: 2 });
  });

  // The upgraded schema is exactly what a fresh installation gets.
  const fresh = await emptyDatabase();
  await withPool(fresh.url, (pool) => migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] }));
  const oncehookOnly = (dump: string) =>
    dump
      .split('\n\n')
      .filter((block) => block.includes('oncehook.'))
      .join('\n\n');
  expect(oncehookOnly(await dumpDatabaseSchema(database.url))).toBe(oncehookOnly(await dumpDatabaseSchema(fresh.url)));
});
