/**
 * `npm run bench:round-trips -- [--transactions N] [--rounds R]`: what a round trip costs in
 * the worker's step transaction, measured without the rest of the pipeline around it.
 *
 * Runs the step transaction of a wallet top-up (the fence, the handler's 3 statements, the
 * final record with the run's `done`) on one connection, three ways, in alternating blocks of
 * N transactions (R rounds, the order flipped every round), each on runs of its own:
 *   - separate:  BEGIN; fence; 3 statements; record; COMMIT (7 round trips; before 2026-12-04)
 *   - begin+:    BEGIN with the fence (beginWith), then as above (6)
 *   - both:      BEGIN with the fence, COMMIT with the record (commitWith): the worker now (5)
 * The fence and the record are the worker's own prepared statements (store/runs.ts). Prints
 * per transaction: round trips (counted), CPU of this process and of its Postgres backend
 * (/proc/<pid>/stat), their sum, and wall time; then each against `separate`. The end-to-end
 * bench (`npm run bench`) shows the same change only within its run-to-run noise: this one
 * isolates it. Its database is its own and dropped at the end.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { countArg, parseScriptArgs } from '@oncehook/harness';
import { beginWith, commitWith, createPool, DEFAULT_SCHEMA, type PoolClient, type PreparedStatement } from '@oncehook/shared';
import { createQueries } from '@oncehook/core';
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';

const { values } = parseScriptArgs(import.meta.url, {
  options: { transactions: { type: 'string', default: '3000' }, rounds: { type: 'string', default: '6' } },
});
const perBlock = countArg('--transactions', values.transactions);
const rounds = countArg('--rounds', values.rounds);

type Variant = 'separate' | 'begin+' | 'both';
const VARIANTS: Variant[] = ['separate', 'begin+', 'both'];
const S = DEFAULT_SCHEMA;
const name = `oncehook_bench_round_trips_${Math.random().toString(36).slice(2, 8)}`;
const db = await createTestDatabaseOn(name);
const pool = createPool(db.url, { max: 1 });
const queries = createQueries(S);
const token = randomUUID();

/** Every block's runs, leased to `token`, each with its attempt started (what a dispatch leaves). */
async function seedRuns(count: number): Promise<number[]> {
  await pool.query(
    `INSERT INTO ${S}.events (provider, kind, event_id, type, payload, state, runs_pending)
     SELECT 'stripe', 'stripe', 'evt_rt_' || g, 'payment_intent.succeeded', '{}', 'processing', 1 FROM generate_series(1, $1::int) g`,
    [count],
  );
  const { rows } = await pool.query<{ id: number }>(
    `INSERT INTO ${S}.handler_runs (event_row_id, handler, state, attempts, lease_token, lease_until, attempt_started_at)
     SELECT id, 'shop.payments', 'processing', 1, $1::uuid, now() + interval '1 day', now() FROM ${S}.events ORDER BY id RETURNING id`,
    [token],
  );
  return rows.map((r) => r.id);
}

let roundTrips = 0;
/** The handler's 3 statements (the shop's ledger credit: account, balance, entry). */
async function handler(tx: PoolClient, runId: number): Promise<void> {
  const account = `acct_${runId % 100}`;
  await tx.query('INSERT INTO ledger_accounts (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [account]);
  await tx.query('UPDATE ledger_accounts SET balance_cents = balance_cents + 500, updated_at = now() WHERE id = $1', [account]);
  await tx.query("INSERT INTO ledger_entries (account_id, amount_cents, currency, source_provider, source_event_id) VALUES ($1, 500, 'usd', 'stripe', $2)", [
    account,
    `evt_rt_${runId}`,
  ]);
  roundTrips += 3;
}

async function stepTransaction(tx: PoolClient, variant: Variant, runId: number): Promise<void> {
  const fence = queries.fenceStatement(runId, token);
  if (variant === 'separate') await tx.query('BEGIN');
  const fenced = variant === 'separate' ? await tx.query(fence) : await beginWith(tx, fence);
  roundTrips += variant === 'separate' ? 2 : 1;
  if (fenced.rowCount !== 1) throw new Error(`run ${runId}: the fence found no lease`);
  await handler(tx, runId);
  const record: PreparedStatement = queries.finalStepRecord({ runId, generation: 0, name: 'credit', kind: 'local', result: { ok: true }, idempotencyKey: null }, token);
  if (variant === 'both') {
    await commitWith(tx, record);
    roundTrips += 1;
  } else {
    await tx.query(record);
    await tx.query('COMMIT');
    roundTrips += 2;
  }
}

const totals = new Map<Variant, { clientMs: number; backendMs: number; wallMs: number; roundTrips: number; n: number }>();
try {
  const runs = await seedRuns(perBlock * VARIANTS.length * (rounds + 1));
  const tx = await pool.connect();
  const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backendPid = rows[0]?.pid;
  /** utime + stime of the backend, ms (clock ticks of 10 ms). */
  const backendMs = () => {
    const fields = readFileSync(`/proc/${backendPid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  };
  let next = 0;
  const block = async (variant: Variant, measured: boolean) => {
    const [c0, b0, w0, r0] = [process.cpuUsage(), backendMs(), performance.now(), roundTrips];
    for (let i = 0; i < perBlock; i += 1) await stepTransaction(tx, variant, runs[next++] as number);
    if (!measured) return;
    const c = process.cpuUsage(c0);
    const t = totals.get(variant) ?? { clientMs: 0, backendMs: 0, wallMs: 0, roundTrips: 0, n: 0 };
    totals.set(variant, {
      clientMs: t.clientMs + (c.user + c.system) / 1000,
      backendMs: t.backendMs + backendMs() - b0,
      wallMs: t.wallMs + performance.now() - w0,
      roundTrips: t.roundTrips + roundTrips - r0,
      n: t.n + perBlock,
    });
  };
  process.stdout.write(`warming up, then ${rounds} rounds of ${perBlock} step transactions per variant...\n`);
  for (const variant of VARIANTS) await block(variant, false);
  for (let round = 0; round < rounds; round += 1) {
    for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) await block(variant, true);
  }
  tx.release();
  const { rows: done } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${S}.handler_runs WHERE state = 'done'`);
  if (done[0]?.n !== next) throw new Error(`${next} step transactions ran, but ${done[0]?.n} runs are done`);

  const us = (ms: number, n: number) => ((ms / n) * 1000).toFixed(1).padStart(7);
  const base = totals.get('separate');
  process.stdout.write(`\nThe step transaction of a wallet top-up, per transaction (${perBlock * rounds} each, one connection)\n`);
  process.stdout.write('variant  | round trips | client CPU us | backend CPU us | CPU us | wall us | CPU vs separate | wall vs separate\n');
  for (const variant of VARIANTS) {
    const t = totals.get(variant);
    if (!t || !base) continue;
    const cpu = t.clientMs + t.backendMs;
    process.stdout.write(
      `${variant.padEnd(8)} | ${String(t.roundTrips / t.n).padStart(11)} | ${us(t.clientMs, t.n).padStart(13)} | ${us(t.backendMs, t.n).padStart(14)} | ${us(cpu, t.n)} | ${us(t.wallMs, t.n)} | ${(cpu / t.n / ((base.clientMs + base.backendMs) / base.n)).toFixed(2).padStart(14)}x | ${(t.wallMs / t.n / (base.wallMs / base.n)).toFixed(2).padStart(15)}x\n`,
    );
  }
} finally {
  await pool.end();
  await dropDatabase(name);
}
process.exit(0);
