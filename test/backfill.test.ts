/**
 * `oncehook backfill` (issue 35; docs/operating.md, "Recovering missed events"): the events a
 * provider never managed to deliver, listed from its own API and claimed through the
 * delivery's claim. The provider is the sandbox's Stripe (its events API and its webhook
 * deliveries, packages/sandbox/src/stripe-events-api.ts), read by Stripe's own client; the
 * command runs as a user runs it (a process of the real entry point); ingest and the worker
 * are real, over real Postgres and Redis.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { paymentSucceeded, ROOT, nodeArgsFor, STRIPE_SECRET, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { SANDBOX_GITHUB_TOKEN, SANDBOX_PADDLE_API_KEY, SANDBOX_STRIPE_API_KEY } from '@oncehook/sandbox';
import { defineHandler } from '@oncehook/sdk';
import type { OncehookWorker } from 'oncehook';
import { createWorkerMetrics } from '@oncehook/shared';
import { createGitHubSource, createPaddleSource, type WebhookSource } from '@oncehook/providers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, runCliHere } from './helpers/cli-here.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { startIngest, startWorker, T, testEnv, testPrefix, type IngestHandle } from './helpers/stack.js';

const ENTRY = path.join(ROOT, 'packages/oncehook/src/cli/entry.ts');
const ADMIN_TOKEN = 'backfill-test-admin-token-0123456789';

let db: TestDatabase;
let sandbox: SandboxHandle;
let prefix: string;
let worker: OncehookWorker;

function oncehook(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgsFor(ENTRY), ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/tmp',
        USER: 'backfill-test',
        ...testEnv({ databaseUrl: db.url, prefix }),
        STRIPE_API_KEY: SANDBOX_STRIPE_API_KEY,
        STRIPE_API_BASE: sandbox.url,
        ...env,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The same command in this process (what the entry point runs): a process each would cost a
 * second of CPU. Each provider's first run, and the race with live redeliveries, are real
 * processes (`oncehook` above): they prove the process wiring.
 */
function oncehookHere(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const base = { ...testEnv({ databaseUrl: db.url, prefix }), USER: 'backfill-test', STRIPE_API_KEY: SANDBOX_STRIPE_API_KEY, STRIPE_API_BASE: sandbox.url };
  return runCliHere(args, { ...base, ...env });
}

async function stripeApi(route: string, body: unknown): Promise<Record<string, number>> {
  const response = await fetch(`${sandbox.url}/stripe/${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, number>;
}

let n = 0;
/**
 * Top-ups (one credit each through the shop's handler), ids evt_bf_<tag>_<i>, created
 * `minutesAgo` (each test lists its own window of Stripe's history).
 */
function topUps(count: number, tag: string, minutesAgo = 0) {
  const created = Math.floor(Date.now() / 1000) - minutesAgo * 60;
  return Array.from({ length: count }, () => {
    n += 1;
    return paymentSucceeded(`evt_bf_${tag}_${n}`, { account: `acct_bf_${tag}`, amount: 100, created });
  });
}

async function creditsOf(account: string): Promise<{ entries: number; events: number }> {
  const { rows } = await db.pool.query<{ entries: number; events: number }>(
    'SELECT count(*)::int AS entries, count(DISTINCT source_event_id)::int AS events FROM ledger_entries WHERE account_id = $1',
    [account],
  );
  return rows[0]!;
}

async function eventsOf(tag: string): Promise<{ origin: string; n: number; rows: number }[]> {
  const { rows } = await db.pool.query<{ origin: string; n: number; rows: number }>(
    `SELECT origin, count(DISTINCT event_id)::int AS n, count(*)::int AS rows FROM ${T.events} WHERE event_id LIKE $1 GROUP BY origin ORDER BY origin`,
    [`evt_bf_${tag}_%`],
  );
  return rows;
}

beforeAll(async () => {
  db = await createTestDatabase();
  sandbox = await startSandbox();
  prefix = testPrefix();
  worker = await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url });
});
afterAll(async () => {
  await worker?.close();
  await sandbox?.close();
  await db?.drop();
});

describe('oncehook backfill stripe', () => {
  it('after an outage of ingest, claims exactly the events Stripe could not deliver: each credited once, those delivered before are known, a second run finds nothing new', async () => {
    let ingest: IngestHandle = await startIngest({ databaseUrl: db.url, prefix });
    await stripeApi('_endpoint', { url: `${ingest.url}/webhooks/stripe`, secret: STRIPE_SECRET });
    // Before the outage: delivered.
    expect(await stripeApi('_events', { events: topUps(100, 'out') })).toMatchObject({ stored: 100, delivered: 100, failed: 0 });
    await ingest.close();
    // The outage: every delivery of 500 more fails (nothing listens there).
    expect(await stripeApi('_events', { events: topUps(500, 'out') })).toMatchObject({ stored: 500, delivered: 0, failed: 500 });
    ingest = await startIngest({ databaseUrl: db.url, prefix, env: { ADMIN_TOKEN } });
    await stripeApi('_endpoint', { url: `${ingest.url}/webhooks/stripe`, secret: STRIPE_SECRET });
    try {
      await waitFor(async () => ((await creditsOf('acct_bf_out')).entries === 100 ? true : null), { timeoutMs: 20_000, what: 'the 100 delivered top-ups credited' });

      const dry = await oncehookHere(['backfill', 'stripe', '--since', '1h', '--dry-run']);
      expect(dry.code, dry.stdout + dry.stderr).toBe(0);
      expect(dry.stdout).toMatch(/dry run: nothing claimed.*listed 500, already known 0, new 500 \(would be claimed\), refused 0 \(5 pages listed\)/);
      expect(await eventsOf('out')).toEqual([{ origin: 'delivery', n: 100, rows: 100 }]);

      const first = await oncehook(['backfill', 'stripe', '--since', '1h']);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect(first.stdout).toMatch(/listed 500, already known 0, new 500 \(claimed, dispatch enqueued\), refused 0 \(5 pages listed\)/);
      await waitFor(async () => ((await creditsOf('acct_bf_out')).entries === 600 ? true : null), { timeoutMs: 60_000, what: 'the 500 backfilled top-ups credited' });
      expect(await creditsOf('acct_bf_out')).toEqual({ entries: 600, events: 600 });
      expect(await eventsOf('out')).toEqual([
        { origin: 'backfill', n: 500, rows: 500 },
        { origin: 'delivery', n: 100, rows: 100 },
      ]);
      // Which backfill fetched each one, and the run recorded as an operator action.
      const { rows: details } = await db.pool.query<{ detail: string }>(
        `SELECT DISTINCT origin_detail AS detail FROM ${T.events} WHERE origin = 'backfill' AND event_id LIKE 'evt_bf_out_%'`,
      );
      expect(details).toEqual([{ detail: expect.stringMatching(/^oncehook backfill stripe --since 1h \(by backfill-test, \d{4}-.*Z\)$/) }]);
      const { rows: actions } = await db.pool.query<{ target: string; actor: string; detail: Record<string, number> }>(
        `SELECT target, actor, detail FROM ${T.actions} WHERE mode = 'backfill' ORDER BY id`,
      );
      expect(actions).toEqual([{ target: 'stripe', actor: 'backfill-test', detail: expect.objectContaining({ listed: 500, new: 500, known: 0, failed: 0 }) }]);

      // Visible where an operator looks: the CLI's show, the admin API and the event's timeline.
      const backfilled = 'evt_bf_out_101';
      const shown = await oncehookHere(['show', `stripe/${backfilled}`]);
      expect(shown.stdout).toMatch(/origin backfill: fetched from the provider's API, never delivered \(oncehook backfill stripe --since 1h/);
      const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const api = (await (await fetch(`${ingest.url}/admin/api/events/stripe/${backfilled}`, { headers: auth })).json()) as { event: { origin: string } };
      expect(api.event.origin).toBe('backfill');
      const { rows: row } = await db.pool.query<{ id: number }>(`SELECT id FROM ${T.events} WHERE event_id = $1`, [backfilled]);
      const page = await (await fetch(`${ingest.url}/admin/events/${row[0]!.id}`, { headers: auth })).text();
      expect(page).toContain('fetched from the provider&#39;s API by a backfill (never delivered)');

      // Stripe still lists them as undelivered: a second run finds nothing new.
      const second = await oncehookHere(['backfill', 'stripe', '--since', '1h']);
      expect(second.code).toBe(0);
      expect(second.stdout).toMatch(/listed 500, already known 500, new 0/);
      // Every event of the window: all known.
      const all = await oncehookHere(['backfill', 'stripe', '--since', '1h', '--all', '--types', 'payment_intent.succeeded']);
      expect(all.code).toBe(0);
      expect(all.stdout).toMatch(/listed 600, already known 600, new 0/);
      expect(await creditsOf('acct_bf_out')).toEqual({ entries: 600, events: 600 });
      // A late redelivery of a backfilled event is a duplicate: nothing more.
      expect(await stripeApi('_redeliver', {})).toMatchObject({ delivered: 600 });
      await new Promise((r) => setTimeout(r, 500));
      expect(await creditsOf('acct_bf_out')).toEqual({ entries: 600, events: 600 });
    } finally {
      await ingest.close();
    }
  });

  it('racing live redeliveries of the same events: both claims held in flight on the same keys at once, then one event each (the claim decides), each credited once', async () => {
    const ingest = await startIngest({ databaseUrl: db.url, prefix });
    const holder = await db.pool.connect();
    try {
      await stripeApi('_endpoint', { url: 'http://127.0.0.1:9/nowhere', secret: STRIPE_SECRET });
      const events = topUps(50, 'race', 120);
      expect(await stripeApi('_events', { events })).toMatchObject({ failed: 50 });
      await stripeApi('_endpoint', { url: `${ingest.url}/webhooks/stripe`, secret: STRIPE_SECRET });
      // The test inserts every key uncommitted: each claim of them (the backfill's and the
      // redeliveries') waits on it inside its INSERT ... ON CONFLICT. Rolled back once both are
      // waiting: they then race for every key.
      await holder.query('BEGIN');
      await holder.query(`INSERT INTO ${T.events} (provider, kind, event_id, type) SELECT 'stripe', 'stripe', id, 'hold' FROM unnest($1::text[]) AS id`, [events.map((e) => e.id)]);
      const waiting = async () => {
        const { rows } = await db.pool.query<{ cli: number; other: number }>(
          `SELECT count(*) FILTER (WHERE application_name = 'oncehook-cli')::int AS cli, count(*) FILTER (WHERE application_name <> 'oncehook-cli')::int AS other
             FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`,
        );
        return rows[0]!;
      };
      // The backfill first: a process start is seconds on a busy machine (8 s were once not
      // enough beside three other files), and a redelivery's claim waiting that long would be
      // answered 503 by its claim deadline. Once the backfill waits, the redeliveries join it.
      const backfill = oncehook(['backfill', 'stripe', '--since', '130m', '--until', '110m', '--all', '--types', 'payment_intent.succeeded']);
      await waitFor(async () => ((await waiting()).cli >= 1 ? true : null), { timeoutMs: 60_000, what: 'the backfill waiting on the held keys' });
      const redelivery = stripeApi('_redeliver', { ids: events.map((e) => e.id) });
      await waitFor(async () => ((await waiting()).other >= 1 ? true : null), {
        timeoutMs: 8_000,
        what: 'a redelivery waiting on the same keys as the backfill',
      });
      await holder.query('ROLLBACK');
      const [result, redelivered] = await Promise.all([backfill, redelivery]);
      expect(result.code, result.stdout + result.stderr).toBe(0);
      expect(redelivered).toMatchObject({ attempted: 50, delivered: 50 });
      const counts = /listed (\d+), already known (\d+), new (\d+)/.exec(result.stdout)!;
      expect(Number(counts[1])).toBe(50);
      expect(Number(counts[2]) + Number(counts[3])).toBe(50);
      await waitFor(async () => ((await creditsOf('acct_bf_race')).entries === 50 ? true : null), { timeoutMs: 60_000, what: 'every raced top-up credited' });
      const origins = await eventsOf('race');
      expect(origins.reduce((sum, o) => sum + o.rows, 0)).toBe(50);
      expect(origins.reduce((sum, o) => sum + o.n, 0)).toBe(50);
      expect(origins.find((o) => o.origin === 'backfill')?.n ?? 0).toBe(Number(counts[3]));
      console.log(`[figure] backfill racing redeliveries of 50 events: backfill claimed ${counts[3]}, redeliveries ${50 - Number(counts[3])}; one event each`);
      await new Promise((r) => setTimeout(r, 500));
      expect(await creditsOf('acct_bf_race')).toEqual({ entries: 50, events: 50 });
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      await ingest.close();
    }
  });

  it('a 429 is waited out (Retry-After) and the listing goes on; an API that keeps failing exits 1 with what was claimed so far, and a rerun goes on', async () => {
    await stripeApi('_endpoint', { url: 'http://127.0.0.1:9/nowhere', secret: STRIPE_SECRET });
    expect(await stripeApi('_events', { events: topUps(250, 'faults', 240) })).toMatchObject({ failed: 250 });
    const window = ['backfill', 'stripe', '--since', '250m', '--until', '230m', '--types', 'payment_intent.succeeded'];
    // Page 1 answered, then Stripe's 500s past the client's own retries.
    await stripeApi('_faults', { status: 500, times: 10, after: 1 });
    const failed = await oncehookHere(window);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/backfill failed: Stripe's API answered 500/);
    expect(failed.stdout).toMatch(/until then, stripe .*listed 100, already known 0, new 100 \(claimed, dispatch enqueued\)/);
    await fetch(`${sandbox.url}/stripe/_faults`, { method: 'DELETE' });
    // Two 429s with Retry-After: 1, then the pages.
    await stripeApi('_faults', { status: 429, times: 2, retryAfter: 1 });
    const limited = await oncehookHere(window);
    expect(limited.code, limited.stdout + limited.stderr).toBe(0);
    expect(limited.stdout.match(/API is rate limiting us; asking again in 1 s/g)).toHaveLength(2);
    expect(limited.stdout).toMatch(/listed 250, already known 100, new 150/);
    await waitFor(async () => ((await creditsOf('acct_bf_faults')).entries === 250 ? true : null), { timeoutMs: 60_000, what: 'every top-up credited' });
  });

  it('refuses what cannot work, before any claim: a wrong key (the API says so), no key, an unknown source, a provider without such an API, a bad window', async () => {
    const { rows: before } = await db.pool.query<{ id: string }>(`SELECT coalesce(max(id), 0) AS id FROM ${T.actions}`);
    const wrongKey = await oncehookHere(['backfill', 'stripe', '--since', '1h'], { STRIPE_API_KEY: 'rk_test_notthesandboxkey0000' });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stdout).toMatch(/backfill failed: Stripe's API answered 401: Invalid API Key provided/);
    const noKey = await oncehookHere(['backfill', 'stripe', '--since', '1h'], { STRIPE_API_KEY: '' });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr + noKey.stdout).toMatch(/STRIPE_API_KEY is not set/);
    const secretAsKey = await oncehookHere(['backfill', 'stripe', '--since', '1h'], { STRIPE_API_KEY: STRIPE_SECRET });
    expect(secretAsKey.code).toBe(1);
    expect(secretAsKey.stderr + secretAsKey.stdout).toMatch(/STRIPE_API_KEY is a webhook signing secret \(whsec_\.\.\.\): that is STRIPE_WEBHOOK_SECRET's/);
    // A key cut short says so (issue 64: it used to get the publishable-key message).
    const cut = await oncehookHere(['backfill', 'stripe', '--since', '1h'], { STRIPE_API_KEY: 'rk_test_x' });
    expect(cut.code).toBe(1);
    expect(cut.stderr + cut.stdout).toMatch(/STRIPE_API_KEY starts like a Stripe key \(rk_test_\) but is too short .*copy the whole key/);
    const unknown = await oncehookHere(['backfill', 'strpe', '--since', '1h']);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toMatch(/no source named "strpe" is configured \(configured: stripe/);
    const noApi = await oncehookHere(['backfill', 'shopify', '--since', '1h'], { SHOPIFY_WEBHOOK_SECRET: 'a-shopify-secret-of-some-length' });
    expect(noApi.code).toBe(1);
    expect(noApi.stdout).toMatch(/shopify \(source "shopify"\) has no API that lists its events.*providers that have one: stripe, github/);
    const noSince = await oncehookHere(['backfill', 'stripe']);
    expect(noSince.code).toBe(2);
    expect(noSince.stderr).toMatch(/backfill needs --since/);
    const backwards = await oncehookHere(['backfill', 'stripe', '--since', '1h', '--until', '2h']);
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toMatch(/--since .* must be before --until/);
    const { rows } = await db.pool.query<{ listed: string; failed: string }>(
      `SELECT detail->>'listed' AS listed, detail->>'failed' AS failed FROM ${T.actions} WHERE mode = 'backfill' AND id > $1`,
      [before[0]!.id],
    );
    // The wrong key's run is recorded (it ran, and failed); the refusals before any call are not.
    expect(rows).toEqual([{ listed: '0', failed: '1' }]);
  });
});

describe('the scheduled backfill (BACKFILL_SCHEDULE)', () => {
  it('two workers, one pass per interval fleet-wide: bounded by its API calls it goes on from its cursor, waits out a 429, and claims every missed event once', async () => {
    // A Stripe account of its own: only this test's events are in its history.
    const account = await startSandbox();
    const workers: OncehookWorker[] = [];
    try {
      const post = async (route: string, body: unknown) =>
        (await fetch(`${account.url}/stripe/${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json();
      expect(await post('_events', { events: topUps(150, 'sched'), deliver: false })).toMatchObject({ stored: 150 });
      // The first list call answers 429 twice (Retry-After: 1 s).
      await post('_faults', { status: 429, times: 2, retryAfter: 1 });
      const env = { BACKFILL_SCHEDULE: 'stripe=2s/1h', BACKFILL_MAX_CALLS: '1', STRIPE_API_KEY: SANDBOX_STRIPE_API_KEY, STRIPE_API_BASE: account.url };
      const metrics = [createWorkerMetrics({ defaultMetrics: false }), createWorkerMetrics({ defaultMetrics: false })];
      for (const m of metrics) workers.push(await startWorker({ databaseUrl: db.url, prefix, sandboxUrl: sandbox.url, env, metrics: m }));
      await waitFor(async () => ((await creditsOf('acct_bf_sched')).entries === 150 ? true : null), { timeoutMs: 60_000, what: 'the scheduled passes to claim all 150' });
      const stats = async () => (await (await fetch(`${account.url}/stripe/_stats`)).json()) as { listCalls: number; faultsAnswered: number };
      expect((await stats()).faultsAnswered).toBe(2);
      // Two pages of 100 and 50, one per pass (BACKFILL_MAX_CALLS=1): the first pass stopped at
      // its bound and the next went on from its cursor.
      const sum = async (name: 'backfillEvents' | 'backfillPasses', labels: Record<string, string>) => {
        let total = 0;
        for (const m of metrics)
          for (const v of (await m[name].get()).values) if (Object.entries(labels).every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x)) total += v.value;
        return total;
      };
      expect(await sum('backfillEvents', { source: 'stripe', result: 'new' })).toBe(150);
      expect(await eventsOf('sched')).toEqual([{ origin: 'backfill', n: 150, rows: 150 }]);
      // From now on, one pass per 2 s interval in the whole fleet, each one list call (nothing
      // new): over 8 s, about 4 calls. Every worker asking at every tick (1 s) would be 16.
      const before = (await stats()).listCalls;
      await new Promise((r) => setTimeout(r, 8_000));
      const calls = (await stats()).listCalls - before;
      expect(calls).toBeGreaterThanOrEqual(2);
      expect(calls).toBeLessThanOrEqual(6);
      // The last pass found a page of known events: the first (100, and a cursor to go on
      // from) or the second (50, and back to the newest).
      const { rows } = await db.pool.query<{ cursor: string | null; error: string | null; known: string }>(
        "SELECT cursor, last_error AS error, last_counts->>'known' AS known FROM oncehook.backfill_schedule WHERE source = 'stripe'",
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]!.error).toBeNull();
      expect(rows[0]!.known === '100' ? rows[0]!.cursor !== null : rows[0]!.known === '50' && rows[0]!.cursor === null).toBe(true);
      expect(await sum('backfillEvents', { source: 'stripe', result: 'new' })).toBe(150);
      expect(await creditsOf('acct_bf_sched')).toEqual({ entries: 150, events: 150 });
    } finally {
      for (const w of workers) await w.close();
      await account.close();
    }
  });
});

/**
 * One provider's rig: an ingest and a worker on a queue prefix of their own, the worker running a
 * handler that records each event it handles in `<kind>_effects` (once per handling), and the
 * sandbox's simulator of that provider (`api`) delivering to the ingest while it is up.
 */
async function providerRig(kind: 'github' | 'paddle', type: string, secret: string, source: () => WebhookSource) {
  const rigPrefix = testPrefix();
  const table = `${kind}_effects`;
  await db.pool.query(`CREATE TABLE IF NOT EXISTS ${table} (event_id text NOT NULL)`);
  const handler = defineHandler({ name: `${kind}-effects`, source: kind, type }, async (event, ctx) => {
    await ctx.transaction('record', async (tx) => void (await tx.query(`INSERT INTO ${table} (event_id) VALUES ($1)`, [event.eventId])), { final: true });
  });
  const worker = await startWorker({ databaseUrl: db.url, prefix: rigPrefix, handlers: [handler] });
  let ingest: IngestHandle | null = null;
  const api = async (route: string, body: unknown) => {
    const response = await fetch(`${sandbox.url}/${kind}/${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await response.json()) as Record<string, number>;
  };
  return {
    prefix: rigPrefix,
    api,
    async ingestUp() {
      ingest = await startIngest({ databaseUrl: db.url, prefix: rigPrefix, sources: new Map([[kind, source()]]) });
      await api('_endpoint', { url: `${ingest.url}/webhooks/${kind}`, secret });
    },
    async ingestDown() {
      await ingest?.close();
      ingest = null;
    },
    async effects() {
      return (await db.pool.query<{ n: number; events: number }>(`SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS events FROM ${table}`)).rows[0]!;
    },
    async close() {
      await ingest?.close();
      await worker.close();
    },
  };
}

describe('oncehook backfill github', () => {
  it('after an outage of ingest, claims exactly the deliveries GitHub could not make (each fetched with its request), each handled once; a rate limit is waited out; a second run finds nothing new', async () => {
    const GH_SECRET = 'backfill-test-github-secret-0123456789';
    const rig = await providerRig('github', 'issues.opened', GH_SECRET, () => createGitHubSource({ secrets: [GH_SECRET] }));
    let issue = 0;
    const issues = (count: number) =>
      Array.from({ length: count }, () => ({
        event: 'issues',
        payload: { action: 'opened', issue: { number: ++issue, title: `issue ${issue}` }, repository: { full_name: 'octo/shop' } },
      }));
    const env = {
      GITHUB_WEBHOOK_SECRET: GH_SECRET,
      GITHUB_API_TOKEN: SANDBOX_GITHUB_TOKEN,
      GITHUB_BACKFILL_HOOK: 'octo/shop/12345',
      GITHUB_API_BASE: sandbox.url,
      QUEUE_PREFIX: rig.prefix,
    };
    try {
      await rig.ingestUp();
      expect(await rig.api('_events', { events: issues(20) })).toMatchObject({ delivered: 20 });
      await rig.ingestDown();
      expect(await rig.api('_events', { events: issues(130) })).toMatchObject({ failed: 130 });
      await rig.ingestUp();
      await waitFor(async () => ((await rig.effects()).n === 20 ? true : null), { timeoutMs: 20_000, what: 'the 20 delivered issues handled' });
      // The first list call hits GitHub's rate limit (403, x-ratelimit-remaining: 0).
      await rig.api('_faults', { status: 403, times: 1 });
      const first = await oncehook(['backfill', 'github', '--since', '1h'], env);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect(first.stdout).toMatch(/API is rate limiting us; asking again in [01] s/);
      expect(first.stdout).toMatch(/listed 130, already known 0, new 130 \(claimed, dispatch enqueued\), refused 0 \(2 pages listed\)/);
      await waitFor(async () => ((await rig.effects()).n === 150 ? true : null), { timeoutMs: 60_000, what: 'the 130 backfilled issues handled' });
      expect(await rig.effects()).toEqual({ n: 150, events: 150 });
      const { rows } = await db.pool.query<{ origin: string; n: number }>(
        `SELECT origin, count(*)::int AS n FROM ${T.events} WHERE provider = 'github' AND event_id LIKE '12345:%' GROUP BY origin ORDER BY origin`,
      );
      expect(rows).toEqual([
        { origin: 'backfill', n: 130 },
        { origin: 'delivery', n: 20 },
      ]);
      const second = await oncehookHere(['backfill', 'github', '--since', '1h'], env);
      expect(second.code).toBe(0);
      expect(second.stdout).toMatch(/listed 130, already known 130, new 0/);
      // GitHub redelivers every one (the same GUIDs): all duplicates, nothing handled twice;
      // after it, the failed deliveries have a successful redelivery: nothing left to list.
      expect(await rig.api('_redeliver', {})).toMatchObject({ attempted: 150, delivered: 150 });
      const third = await oncehookHere(['backfill', 'github', '--since', '1h'], env);
      expect(third.stdout).toMatch(/listed 0, already known 0, new 0/);
      await new Promise((r) => setTimeout(r, 500));
      expect(await rig.effects()).toEqual({ n: 150, events: 150 });
    } finally {
      await rig.close();
    }
  });
});

describe('oncehook backfill paddle', () => {
  it('after an outage of ingest, claims exactly the notifications Paddle could not deliver, each handled once; a 429 is waited out; a second run finds nothing new', async () => {
    const PD_SECRET = 'pdl_ntfset_01backfilltestsecret0123456789';
    const rig = await providerRig('paddle', 'transaction.completed', PD_SECRET, () => createPaddleSource({ secrets: [PD_SECRET] }));
    let txn = 0;
    const completed = (count: number) =>
      Array.from({ length: count }, () => {
        txn += 1;
        return { event_id: `evt_pd_${txn}`, event_type: 'transaction.completed', occurred_at: new Date().toISOString(), data: { id: `txn_${txn}`, status: 'completed' } };
      });
    const env = { PADDLE_WEBHOOK_SECRET: PD_SECRET, PADDLE_API_KEY: SANDBOX_PADDLE_API_KEY, PADDLE_API_BASE: sandbox.url, QUEUE_PREFIX: rig.prefix };
    try {
      await rig.ingestUp();
      expect(await rig.api('_events', { events: completed(10) })).toMatchObject({ delivered: 10 });
      await rig.ingestDown();
      expect(await rig.api('_events', { events: completed(250) })).toMatchObject({ failed: 250 });
      await rig.ingestUp();
      await waitFor(async () => ((await rig.effects()).n === 10 ? true : null), { timeoutMs: 20_000, what: 'the 10 delivered transactions handled' });
      await rig.api('_faults', { status: 429, times: 1, retryAfter: 1 });
      const first = await oncehook(['backfill', 'paddle', '--since', '1h'], env);
      expect(first.code, first.stdout + first.stderr).toBe(0);
      expect(first.stdout).toMatch(/API is rate limiting us; asking again in 1 s/);
      expect(first.stdout).toMatch(/listed 250, already known 0, new 250 \(claimed, dispatch enqueued\), refused 0 \(2 pages listed\)/);
      await waitFor(async () => ((await rig.effects()).n === 260 ? true : null), { timeoutMs: 60_000, what: 'the 250 backfilled transactions handled' });
      const second = await oncehookHere(['backfill', 'paddle', '--since', '1h', '--all'], env);
      expect(second.stdout).toMatch(/listed 260, already known 260, new 0/);
      expect(await rig.effects()).toEqual({ n: 260, events: 260 });
    } finally {
      await rig.close();
    }
  });
});
