import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createPool, beginWith, type PoolClient } from '@oncehook/shared';
import { createTestDatabaseOn, dropDatabase } from './bench/databases.js';
import { runStatements } from '../packages/core/src/store/sql/runs.js';
import { tablesFor } from '../packages/core/src/store/tables.js';
import { prepared } from '../packages/core/src/store/prepared.js';

const name = 'oncehook_fence_micro';
await dropDatabase(name).catch(() => {});
const { url } = await createTestDatabaseOn(name);
const pool = createPool(url, { max: 1 });
const token = randomUUID();
const ev = await pool.query<{ id: number }>(`INSERT INTO oncehook.events (provider, kind, event_id, type, payload, state) VALUES ('stripe','stripe','evt_m','t','{}','processing') RETURNING id`);
const run = await pool.query<{ id: number }>(
  `INSERT INTO oncehook.handler_runs (event_row_id, handler, state, attempts, lease_token, lease_until) VALUES ($1,'h','processing',1,$2, now() + interval '1 day') RETURNING id`,
  [ev.rows[0]?.id, token],
);
const runId = run.rows[0]?.id;
const FENCE = prepared('lockLeasedRun', runStatements(tablesFor('oncehook')).LOCK_LEASED_RUN);
const client: PoolClient = await pool.connect();
const backend = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
const ticks = () => {
  const f = readFileSync(`/proc/${backend}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return Number(f[11]) + Number(f[12]);
};
async function separate() {
  await client.query('BEGIN');
  const r = await client.query(FENCE([runId, token]));
  if (r.rowCount !== 1) throw new Error('fence');
  await client.query('COMMIT');
}
async function pipelined() {
  const r = await beginWith(client, FENCE([runId, token]));
  if (r.rowCount !== 1) throw new Error('fence');
  await client.query('COMMIT');
}
const N = Number(process.argv[2] ?? 3000);
const totals: Record<string, { client: number; backend: number; wall: number; n: number }> = { separate: { client: 0, backend: 0, wall: 0, n: 0 }, pipelined: { client: 0, backend: 0, wall: 0, n: 0 } };
for (let i = 0; i < N / 10; i += 1) await separate();
for (let i = 0; i < N / 10; i += 1) await pipelined();
for (let round = 0; round < 8; round += 1) {
  for (const [label, fn] of round % 2 === 0 ? ([['separate', separate], ['pipelined', pipelined]] as const) : ([['pipelined', pipelined], ['separate', separate]] as const)) {
    const c0 = process.cpuUsage();
    const b0 = ticks();
    const w0 = performance.now();
    for (let i = 0; i < N; i += 1) await fn();
    const c = process.cpuUsage(c0);
    const t = totals[label];
    if (!t) throw new Error(label);
    t.client += (c.user + c.system) / 1000;
    t.backend += (ticks() - b0) * 10;
    t.wall += performance.now() - w0;
    t.n += N;
  }
}
for (const [label, t] of Object.entries(totals)) {
  console.log(`${label.padEnd(10)} per transaction: client ${((t.client / t.n) * 1000).toFixed(1)} us, backend ${((t.backend / t.n) * 1000).toFixed(1)} us, total ${(((t.client + t.backend) / t.n) * 1000).toFixed(1)} us, wall ${((t.wall / t.n) * 1000).toFixed(1)} us`);
}
client.release();
await pool.end();
await dropDatabase(name);
