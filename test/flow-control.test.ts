/**
 * Flow control over real processes (docs/flow-control.md): worker processes run the handlers of
 * test/fixtures/flow-handlers, which call the sandbox's work API; the sandbox measures in
 * flight ITSELF (per task, per key) and when each call started. Every figure printed
 * (`[figure] ...`) is for the issue notes, never asserted as a time.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, vi } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { deliver, killAllServices, paymentSucceeded, signStripe, spawnService, startSandbox, waitFor, type SandboxHandle, type Service } from '@oncehook/harness';
import { startIngest, T, testEnv, testPrefix } from './helpers/stack.js';

// Each test drains a backlog through real processes: 15-30 s on an idle machine, twice that and
// more on a busy one (the suite beside two CPU hogs). Their waits name what they wait for.
vi.setConfig({ testTimeout: 180_000 });

let db: TestDatabase;
let sandbox: SandboxHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
});
afterEach(async () => {
  await killAllServices();
});
afterAll(async () => {
  await sandbox.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events}, oncehook.pauses, oncehook.rate_windows, oncehook.handler_health, oncehook.operator_actions CASCADE`);
  sandbox.sandbox.reset();
});

function flowEnv(prefix: string, handlers: string, extra: Record<string, string> = {}): Record<string, string> {
  return testEnv({
    databaseUrl: db.url,
    prefix,
    sandboxUrl: sandbox.url,
    extra: { ONCEHOOK_HANDLERS: 'test/fixtures/flow-handlers', FLOW_HANDLERS: handlers, FLOW_WORK_URL: sandbox.url, WORKER_CONCURRENCY: '32', ...extra },
  });
}

async function startWorkers(n: number, env: Record<string, string>): Promise<Service[]> {
  const workers = Array.from({ length: n }, () => spawnService('worker', env));
  await Promise.all(workers.map((w) => w.waitFor(/worker ready/, 30_000)));
  return workers;
}

/** Delivers events `${prefix}-0..n-1`, customer `cus_<i % keys>`, 20 at a time; every one must be accepted. */
async function deliverMany(url: string, idPrefix: string, n: number, keys = 10): Promise<void> {
  for (let i = 0; i < n; i += 20) {
    const batch = Array.from({ length: Math.min(20, n - i) }, (_, j) => deliver(url, signStripe(paymentSucceeded(`${idPrefix}-${i + j}`, { account: `cus_${(i + j) % keys}` }))));
    for (const result of await Promise.all(batch)) expect(result.status).toBe(202);
  }
}

async function runStates(handler: string): Promise<Record<string, number>> {
  const { rows } = await db.pool.query<{ state: string; waiting: string | null; n: number }>(
    `SELECT state, waiting, count(*)::int AS n FROM ${T.runs} WHERE handler = $1 GROUP BY state, waiting`,
    [handler],
  );
  return Object.fromEntries(rows.map((r) => [r.waiting ? `${r.state}:${r.waiting}` : r.state, r.n]));
}

async function allDone(handler: string, n: number, timeoutMs = 90_000): Promise<void> {
  await waitFor(async () => ((await runStates(handler)).done === n ? true : null), { timeoutMs, what: `${n} ${handler} runs done` });
}

function onceEach(appliedByKey: Record<string, number>): boolean {
  return Object.values(appliedByKey).every((n) => n === 1);
}

it('concurrency: 3 across 3 workers x WORKER_CONCURRENCY=32: never more than 3 in flight (the sandbox measures), each effect once; a kill -9 frees its slot when the lease expires', async () => {
  const prefix = testPrefix();
  const env = flowEnv(prefix, 'limited', { FLOW_WORK_MS: '300' });
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    // Three workers; the one to be killed makes calls of 1.5 s, the others of 300 ms, so a kill
    // sent once it has logged a call lands inside that call (a 300 ms call could end between
    // the look and the kill: that run then finished at its first attempt, and a run of the
    // test once failed so).
    // The slow one starts first and takes the first slots: a worker that frees a slot runs the
    // next waiter itself (the hand-over), so two fast workers that took all three slots first
    // could keep them for the whole backlog, and no run of the slow one would be there to kill
    // (a CI run failed so).
    const slow = await startWorkers(1, { ...env, FLOW_WORK_MS: '1500' });
    await deliverMany(ingest.url, 'evt_lim', 20);
    await waitFor(async () => (slow[0]!.lines.some((l) => l.includes('calling external step')) ? true : null), { timeoutMs: 30_000, what: 'the slow worker calling' });
    await startWorkers(2, env);
    await deliverMany(ingest.url, 'evt_lim_more', 40);
    // Kill the slow worker while it holds a slot: it logged the external call of a run in
    // progress (each worker's log lines carry the event's row id).
    const victim = await waitFor(
      async () => {
        if (((await runStates('flow-limited')).done ?? 0) < 6) return null;
        const { rows } = await db.pool.query<{ id: string; run: string }>(
          `SELECT event_row_id::text AS id, id::text AS run FROM ${T.runs} WHERE handler = 'flow-limited' AND state = 'processing' AND lease_until > now() + interval '1 second'`,
        );
        for (const row of rows) {
          const holder = slow.find((w) => w.lines.some((l) => l.includes(`"rowId":${row.id},`) && l.includes('calling external step')));
          if (holder) return { holder, runId: Number(row.run) };
        }
        return null;
      },
      { timeoutMs: 30_000, what: 'a worker holding a slot' },
    );
    const killedAt = Date.now();
    await victim.holder.kill9();
    await allDone('flow-limited', 60);
    // The dead worker's run kept its slot until its lease expired (not freed early, not leaked):
    // its next attempt started more than a second after the kill, and then it finished.
    const { rows: retried } = await db.pool.query<{ at: Date }>(`SELECT started_at AS at FROM oncehook.attempt_history WHERE run_id = $1 AND attempt = 2`, [victim.runId]);
    expect(retried).toHaveLength(1);
    const heldFor = retried[0]!.at.getTime() - killedAt;
    expect(heldFor).toBeGreaterThan(1_000);
    console.log(
      `[figure] concurrency 3, 60 runs of 300 ms (1.5 s on the worker killed) over 3 workers x 32: the killed worker's run was taken over ${heldFor} ms after the kill -9 (LEASE_MS=2000); all done ${Date.now() - killedAt} ms after it`,
    );
    const work = sandbox.work('limited');
    expect(work.maxInFlight).toBeLessThanOrEqual(3);
    expect(work.maxInFlight).toBe(3); // the limit is used, not just respected
    expect(work.applied).toBe(60);
    expect(onceEach(work.appliedByKey)).toBe(true);
    // Runs that waited are not attempts: only the killed worker's runs took a second.
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.runs} WHERE handler = 'flow-limited' AND attempts > 1`);
    expect(rows[0]!.n).toBeLessThanOrEqual(3);
  } finally {
    await ingest.close();
  }
});

it('concurrency { key, limit: 1 }: a backlog of 200 runs over 10 keys drains; runs of one key never overlap, different keys do', async () => {
  const prefix = testPrefix();
  const env = flowEnv(prefix, 'keyed', { FLOW_WORK_MS: '40' });
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    // The backlog: the handler is paused while 200 events arrive, then resumed all at once.
    await db.pool.query(`INSERT INTO oncehook.pauses (scope, name, reason, actor) VALUES ('handler', 'flow-keyed', 'build a backlog', 'test')`);
    const workers = await startWorkers(2, env);
    await deliverMany(ingest.url, 'evt_key', 200, 10);
    await waitFor(async () => ((await runStates('flow-keyed'))['received:paused'] === 200 ? true : null), { timeoutMs: 30_000, what: '200 runs waiting: paused' });
    const resumed = Date.now();
    const run = spawnService('cli', env, ['resume', 'handler', 'flow-keyed', '--reason', 'drain']);
    expect((await run.exited).code).toBe(0);
    await allDone('flow-keyed', 200);
    const drained = Date.now() - resumed;
    const work = sandbox.work('keyed');
    expect(work.maxInFlightPerKey).toBe(1);
    expect(work.maxKeysInFlight).toBeGreaterThan(1);
    expect(work.applied).toBe(200);
    expect(onceEach(work.appliedByKey)).toBe(true);
    // How well the gate keeps the 10 slots busy, from the attempt log: the share of the
    // stretch (first lease to last end) during which the slots held a run (a run's own time,
    // its statements and its call, is the handler's; the gaps between runs are the gate's), and
    // the runs per second against the bound the call time alone allows (200 x 40 ms / 10 slots).
    const { rows: use } = await db.pool.query<{ busy: number; span: number }>(
      `SELECT sum(extract(epoch FROM a.ended_at - a.started_at))::float8 * 1000 AS busy,
              extract(epoch FROM max(a.ended_at) - min(a.started_at))::float8 * 1000 AS span
         FROM oncehook.attempt_history a JOIN ${T.runs} r ON r.id = a.run_id WHERE r.handler = 'flow-keyed'`,
    );
    const { busy, span } = use[0]!;
    const bound = (200 * 40) / 10;
    console.log(
      `[figure] keyed concurrency (limit 1, 10 keys, 2 workers x 32): a backlog of 200 runs of a 40 ms call drained in ${span.toFixed(0)} ms from the first lease to the last end (${drained} ms after the resume command); the slots held a run ${((busy / (10 * span)) * 100).toFixed(0)}% of that time (mean run ${(busy / 200).toFixed(0)} ms: lease, renewal, call, record, done); ${(span / bound).toFixed(1)}x the ${bound} ms the call time alone allows`,
    );
    // A run waiting for a slot is woken, not polled (test/flow-control-engine.test.ts shows it
    // gets no job): each run's fence moves a few times (its release from the pause, its wait,
    // its wake-up; again if a new run took the freed slot first).
    const { rows } = await db.pool.query<{ mean: number; most: number }>(`SELECT avg(waits)::float8 AS mean, max(waits)::int AS most FROM ${T.runs} WHERE handler = 'flow-keyed'`);
    const requeues = workers.flatMap((w) => w.lines).filter((l) => l.includes('re-enqueued ('));
    console.log(
      `[figure] keyed concurrency: fence moves per run ${rows[0]!.mean.toFixed(2)} on average, ${rows[0]!.most} at most; ${requeues.length} re-enqueues by the reconciler (REQUEUE_AFTER_MS=500: jobs not picked up within it)`,
    );
  } finally {
    await ingest.close();
  }
});

it("rateLimit { limit: 20, period: '1s' }: starts never exceed 20 per second plus one period's burst; none dropped", async () => {
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    // What is tested is where starts fall, not recovery: a lease long enough that a loaded
    // machine never has a run abandon its call (lease-clock.ts) and start again.
    // Where each start was TAKEN: the gate's upsert of its window row, logged by a trigger of
    // this test in the same statement (a lease not taken rolls its log row back with it).
    // Neither the attempt record (its time is its transaction's start, hundreds of ms before
    // the gate counted it on a busy machine) nor the sandbox (it sees each call later still)
    // says where a start was counted: their figures are printed, not asserted.
    await db.pool.query(`CREATE TABLE IF NOT EXISTS public.rate_takes (handler text, window_start timestamptz, started int, at timestamptz);
      TRUNCATE public.rate_takes;
      CREATE OR REPLACE FUNCTION public.log_rate_take() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO public.rate_takes VALUES (NEW.handler, NEW.window_start, NEW.started, clock_timestamp()); RETURN NULL; END $$;
      CREATE OR REPLACE TRIGGER rate_takes AFTER INSERT OR UPDATE ON oncehook.rate_windows FOR EACH ROW EXECUTE FUNCTION public.log_rate_take();`);
    await startWorkers(2, flowEnv(prefix, 'rated', { FLOW_WORK_MS: '5', LEASE_MS: '10000' }));
    await deliverMany(ingest.url, 'evt_rate', 220);
    await allDone('flow-rated', 220);
    const work = sandbox.work('rated');
    expect(work.applied).toBe(220);
    expect(onceEach(work.appliedByKey)).toBe(true);
    const { rows: takes } = await db.pool.query<{ window: number; started: number; at: number }>(
      `SELECT (extract(epoch FROM window_start) * 1000)::float8 AS window, started, (extract(epoch FROM at) * 1000)::float8 AS at
         FROM public.rate_takes WHERE handler = 'flow-rated' ORDER BY at`,
    );
    // Every attempt took one start, and waiting took none: as many starts as attempts (220, and
    // more if an attempt failed and its run was retried: a loaded machine may fail one).
    const { rows: attempts } = await db.pool.query<{ t: number; outcome: string | null; error: string | null }>(
      `SELECT (extract(epoch FROM a.started_at) * 1000)::float8 AS t, a.outcome, a.error FROM oncehook.attempt_history a JOIN ${T.runs} r ON r.id = a.run_id WHERE r.handler = 'flow-rated' ORDER BY 1`,
    );
    expect(takes).toHaveLength(attempts.length);
    expect(takes.length).toBeGreaterThanOrEqual(220);
    // Each start was counted once, in a 1 s window, and no window counted more than 20.
    const byWindow = new Map<number, number[]>();
    for (const take of takes) byWindow.set(take.window, [...(byWindow.get(take.window) ?? []), take.started]);
    for (const [window, counts] of byWindow) {
      expect(window % 1000).toBe(0);
      expect(counts.sort((a, b) => a - b)).toEqual(Array.from({ length: counts.length }, (_, i) => i + 1));
      expect(counts.length).toBeLessThanOrEqual(20);
    }
    // 220 starts at 20 per window: 11 windows at least, 10 s from the first to the last.
    expect(byWindow.size).toBeGreaterThanOrEqual(11);
    expect(Math.max(...byWindow.keys()) - Math.min(...byWindow.keys())).toBeGreaterThanOrEqual(10_000);
    const mostOf = (list: number[], ms: number) => Math.max(...list.map((t, i) => list.filter((u, j) => j >= i && u < t + ms).length));
    const taken = takes.map((t) => t.at);
    const begun = attempts.map((r) => r.t);
    const seen = [...work.starts].sort((a, b) => a - b);
    const retried = attempts.filter((a) => a.outcome !== 'done');
    console.log(
      `[figure] rate limit 20/s: ${takes.length} starts (${retried.length} attempt(s) not done and retried${retried.length ? `: ${[...new Set(retried.map((a) => `${a.outcome}: ${a.error?.slice(0, 120)}`))].join('; ')}` : ''}) in ${byWindow.size} windows of 1 s (most in one: ${Math.max(...[...byWindow.values()].map((c) => c.length))}); most in 1 s / 3 s / 5 s: as taken ${mostOf(taken, 1000)}, ${mostOf(taken, 3000)}, ${mostOf(taken, 5000)}; by their transactions' start ${mostOf(begun, 1000)}, ${mostOf(begun, 3000)}, ${mostOf(begun, 5000)}; as the sandbox saw them ${mostOf(seen, 1000)}, ${mostOf(seen, 3000)}, ${mostOf(seen, 5000)}`,
    );
  } finally {
    await ingest.close();
  }
});

it('pause (CLI): deliveries still accepted and claimed, none run, through a worker kill -9 and a restart of every process; resume: all done, each effect once', async () => {
  const prefix = testPrefix();
  const env = flowEnv(prefix, 'plain', { FLOW_WORK_MS: '5' });
  const cli = async (args: string[]) => {
    const run = spawnService('cli', env, args);
    const { code } = await run.exited;
    return { code, out: run.lines.join('\n') };
  };
  const paused = await cli(['pause', 'handler', 'flow-plain', '--reason', 'email provider down', '--actor', 'ops-test']);
  expect(paused.code).toBe(0);
  expect(paused.out).toContain('paused handler "flow-plain"');

  let ingest = await startIngest({ databaseUrl: db.url, prefix });
  let workers = await startWorkers(2, env);
  await deliverMany(ingest.url, 'evt_pause', 30);
  await workers[0]!.kill9();
  await waitFor(async () => ((await runStates('flow-plain'))['received:paused'] === 30 ? true : null), { timeoutMs: 20_000, what: '30 runs waiting: paused' });
  // The reconciler leaves paused runs alone (no re-enqueue, no write), well past REQUEUE_AFTER_MS.
  const touched = async () => (await db.pool.query<{ t: string }>(`SELECT max(updated_at)::text AS t FROM ${T.runs} WHERE handler = 'flow-plain'`)).rows[0]!.t;
  const before = await touched();
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(await touched()).toBe(before);

  // Every process restarts; the pause is in Postgres.
  await ingest.close();
  await killAllServices();
  ingest = await startIngest({ databaseUrl: db.url, prefix });
  workers = await startWorkers(2, env);
  await deliverMany(ingest.url, 'evt_pause_after', 10);
  await waitFor(async () => ((await runStates('flow-plain'))['received:paused'] === 40 ? true : null), { timeoutMs: 20_000, what: '40 runs waiting: paused' });
  expect(sandbox.work('plain').calls).toBe(0);
  const list = await cli(['paused']);
  expect(list.out).toMatch(/handler\s+flow-plain\s+since .* by ops-test, 40 run\(s\) waiting: email provider down/);

  const resumed = await cli(['resume', 'handler', 'flow-plain', '--reason', 'provider back']);
  expect(resumed.code).toBe(0);
  expect(resumed.out).toContain('40 waiting run(s) enqueued');
  await allDone('flow-plain', 40);
  const work = sandbox.work('plain');
  expect(work.applied).toBe(40);
  expect(onceEach(work.appliedByKey)).toBe(true);
  const actions = await db.pool.query<{ mode: string; target: string; actor: string; reason: string }>(
    `SELECT mode, target, actor, reason FROM oncehook.operator_actions WHERE target IS NOT NULL ORDER BY id`,
  );
  expect(actions.rows).toEqual([
    { mode: 'pause', target: 'handler:flow-plain', actor: 'ops-test', reason: 'email provider down' },
    { mode: 'resume', target: 'handler:flow-plain', actor: expect.any(String), reason: 'provider back' },
  ]);
  expect((await cli(['resume', 'handler', 'flow-plain', '--reason', 'again'])).code).toBe(1);
  await ingest.close();
});

it('priority: with one worker saturated by a low-priority backlog, a high-priority event overtakes the queue', async () => {
  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  try {
    await startWorkers(1, flowEnv(prefix, 'low,high', { FLOW_WORK_MS: '100', WORKER_CONCURRENCY: '4' }));
    await deliverMany(ingest.url, 'evt_backlog', 100);
    await waitFor(async () => (sandbox.work('low').applied >= 8 ? true : null), { timeoutMs: 30_000, what: 'the backlog running' });
    const sentAt = Date.now();
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_urgent', { account: 'cus_urgent' })))).status).toBe(202);
    await waitFor(async () => (sandbox.work('high').applied === 1 ? true : null), { timeoutMs: 60_000, what: 'the urgent run' });
    const highAt = sandbox.work('high').starts[0]!;
    await allDone('flow-low', 101);
    const lowStarts = sandbox.work('low').starts;
    const after = lowStarts.filter((t) => t > highAt).length;
    console.log(
      `[figure] priority: the high-priority run started ${highAt - sentAt} ms after its delivery, ahead of ${after} of ${lowStarts.length} queued low-priority runs (1 worker x 4, runs of 100 ms)`,
    );
    // FIFO would have started it after every low run queued before it.
    expect(after).toBeGreaterThan(lowStarts.length / 2);
  } finally {
    await ingest.close();
  }
});
