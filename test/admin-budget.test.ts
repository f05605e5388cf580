/**
 * The admin cannot take what ingest needs (issue 63, F1): slow searches from several read-only
 * users beside signed deliveries, one at a time and in bursts, against a real ingest over
 * 200,000 stored events. Every delivery is accepted, /readyz stays 200, no search answers 500
 * (a busy admin is 503 `admin_busy`, a user past their searches 429, a slow one 422), and the
 * admin never holds more than ADMIN_POOL_SIZE connections. A search whose client goes away is
 * cancelled in Postgres (a cancel request: the statement stops, it does not run to a timeout).
 */
import { deliver, paymentSucceeded, signStripe, waitFor } from '@oncehook/harness';
import { createOperations } from '@oncehook/core';
import { createPool } from '@oncehook/shared';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, q, startIngest, T, testPrefix, testQueues, testQueueStore } from './helpers/stack.js';

const USERS = ['ana', 'ben', 'cai', 'dee', 'eli'].map((name) => ({ name, token: `${name}-readonly-token-0123456789` }));
const FILLED = 200_000;

let db: TestDatabase;
let ingest: IngestHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state, received_at, updated_at)
     SELECT 'stripe', 'stripe', 'evt_budget_' || g, 'payment_intent.succeeded',
            jsonb_build_object('id', 'evt_budget_' || g, 'data', jsonb_build_object('object', jsonb_build_object('customer', 'cus_' || (g % 500), 'amount', g, 'description', 'order ' || g))),
            'done', now() - (${FILLED} - g) * interval '1 second', now()
       FROM generate_series(1, ${FILLED}) g`,
  );
  await db.pool.query(`ANALYZE ${T.events}`);
  ingest = await startIngest({
    databaseUrl: db.url,
    prefix: testPrefix(),
    env: {
      ADMIN_TOKENS: USERS.map((u) => `${u.name}=${u.token}`).join(','),
      ADMIN_READ_ONLY: 'true',
      ADMIN_POOL_SIZE: '2',
      ADMIN_POOL_WAIT_MS: '300',
      ADMIN_STATEMENT_TIMEOUT_MS: '4000',
      ADMIN_SEARCHES_PER_USER: '2',
      DATABASE_POOL_SIZE: '4',
      // "Within its usual latency": a delivery that waited for an admin's connection would miss
      // this (the suite's default is 10 s for loaded machines; a claim takes milliseconds).
      CLAIM_TIMEOUT_MS: '2000',
    },
  });
});
afterAll(async () => {
  await ingest?.close();
  await db?.drop();
});

/** The admin's backends in Postgres now. */
async function adminBackends(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'oncehook-admin'`);
  return rows[0]!.n;
}

describe('the admin beside deliveries', () => {
  it('ten slow payload searches at a time from five users: every delivery accepted, /readyz 200, no 500, at most 2 admin connections', { timeout: 120_000 }, async () => {
    let searching = true;
    const searchStatuses = new Map<number, number>();
    const bodies: string[] = [];
    const searchers = USERS.flatMap((user) =>
      [0, 1, 2].map(async () => {
        while (searching) {
          // `~` with no path reads every payload of the window: 200,000 of them.
          const response = await fetch(`${ingest.url}/admin/api/events?since=30d&payload=${encodeURIComponent('~no such needle')}`, {
            headers: { authorization: `Bearer ${user.token}` },
          });
          searchStatuses.set(response.status, (searchStatuses.get(response.status) ?? 0) + 1);
          if (response.status >= 500 && response.status !== 503) bodies.push(await response.text());
          else await response.arrayBuffer();
        }
      }),
    );
    let watching = true;
    const ready: number[] = [];
    const backends: number[] = [];
    const watch = (async () => {
      while (watching) {
        ready.push((await fetch(`${ingest.url}/readyz`)).status);
        backends.push(await adminBackends());
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await waitFor(async () => ((searchStatuses.get(429) ?? 0) + (searchStatuses.get(503) ?? 0) > 0 || (await adminBackends()) === 2 ? true : null), {
      timeoutMs: 20_000,
      what: 'the searches to fill the admin',
    });
    const statuses: number[] = [];
    // One at a time...
    for (let i = 0; i < 20; i += 1) statuses.push((await deliver(ingest.url, signStripe(paymentSucceeded(`evt_beside_${i}`)))).status);
    // ...and in bursts.
    for (let burst = 0; burst < 3; burst += 1) {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => deliver(ingest.url, signStripe(paymentSucceeded(`evt_burst_${burst}_${i}`)))));
      statuses.push(...answers.map((a) => a.status));
    }
    searching = false;
    await Promise.all(searchers);
    watching = false;
    await watch;
    expect(statuses).toEqual(Array(80).fill(202));
    expect(ready.every((s) => s === 200)).toBe(true);
    expect(bodies).toEqual([]);
    expect([...searchStatuses.keys()].every((s) => [200, 422, 429, 503].includes(s))).toBe(true);
    // The searches were really turned away: past a user's two (429) or past the admin's two connections (503).
    expect((searchStatuses.get(429) ?? 0) + (searchStatuses.get(503) ?? 0)).toBeGreaterThan(0);
    expect(Math.max(...backends)).toBeLessThanOrEqual(2);
  });

  it('a busy admin says why (503 admin_busy naming ADMIN_POOL_SIZE); a user past their searches gets 429; a payload search needs a time range', async () => {
    const user = USERS[0]!;
    const get = (path: string, token = user.token) => fetch(`${ingest.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    const noRange = await get(`/admin/api/events?payload=${encodeURIComponent('~x')}`);
    expect(noRange.status).toBe(400);
    expect(((await noRange.json()) as { message: string }).message).toMatch(/payload: a payload search needs a time range: add since/);
    // Three at once from one user: one is refused before it reaches the database.
    const three = await Promise.all([0, 1, 2].map(() => get(`/admin/api/events?since=30d&payload=${encodeURIComponent('~x')}`)));
    const refused = three.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(((await refused[0]!.json()) as { error: string; message: string }).message).toMatch(/you have 2 searches running \(ADMIN_SEARCHES_PER_USER\)/);
    for (const r of three) await r.arrayBuffer().catch(() => {});
    // Both connections held by two other users' searches, waiting on a lock of the events table
    // (up to the admin's 2 s lock_timeout): a third user's page waits 300 ms, then 503.
    const locker = await db.pool.connect();
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${T.events} IN ACCESS EXCLUSIVE MODE`);
    let holding: Promise<Response>[] = [];
    try {
      holding = [USERS[1]!, USERS[2]!].map((u) => get('/admin/api/events?since=1h', u.token));
      await waitFor(
        async () =>
          (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'oncehook-admin' AND wait_event_type = 'Lock'`)).rows[0]!
            .n === 2
            ? true
            : null,
        { timeoutMs: 2_000, intervalMs: 20, what: 'both admin connections waiting on the lock' },
      );
      const busy = await get('/admin/api/pauses', USERS[3]!.token);
      expect(busy.status).toBe(503);
      expect(busy.headers.get('retry-after')).toBe('5');
      expect((await busy.json()) as { error: string; message: string }).toMatchObject({
        error: 'admin_busy',
        message: expect.stringMatching(/ADMIN_POOL_SIZE.*deliveries are not affected/),
      });
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
    for (const r of await Promise.all(holding)) await r.arrayBuffer();
  });
});

describe('a search whose client goes away', () => {
  it('is cancelled in Postgres at once (a cancel request), not left to its lock or statement timeout', async () => {
    // The events table locked by another transaction: a search waits on the lock (it would wait
    // until the admin's lock_timeout, 2 s). Its client leaves after 200 ms.
    const locker = await db.pool.connect();
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${T.events} IN ACCESS EXCLUSIVE MODE`);
    try {
      const adminPool = createPool(db.url, { max: 1, applicationName: 'oncehook-admin-probe', lockTimeoutMs: 30_000, statementTimeoutMs: 30_000 });
      const ops = createOperations({ pool: adminPool, queries: q, queue: testQueues(testQueueStore(db.url, testPrefix()), testPrefix()) });
      const gone = new AbortController();
      const searched = ops.list({ since: new Date(Date.now() - 3_600_000) }, { signal: gone.signal }).then(
        () => null,
        (error: Error) => error,
      );
      await waitFor(
        async () =>
          (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'oncehook-admin-probe' AND wait_event_type = 'Lock'`))
            .rows[0]!.n === 1
            ? true
            : null,
        { timeoutMs: 10_000, what: 'the search waiting on the lock' },
      );
      gone.abort();
      // With lock and statement timeouts of 30 s, only the cancel request can end it now.
      const error = await searched;
      expect(error?.name).toBe('SearchAbandonedError');
      await adminPool.end();

      // Over HTTP: the page's client disconnects; the admin's backend stops waiting right away.
      const leaving = new AbortController();
      const request = fetch(`${ingest.url}/admin/api/events?since=1h`, { headers: { authorization: `Bearer ${USERS[4]!.token}` }, signal: leaving.signal }).catch(() => null);
      const waiting = async () =>
        (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'oncehook-admin' AND wait_event_type = 'Lock'`)).rows[0]!.n;
      await waitFor(async () => ((await waiting()) === 1 ? true : null), { timeoutMs: 10_000, what: 'the page search waiting on the lock' });
      leaving.abort();
      await request;
      // Cancelled within a second; the admin's lock_timeout (2 s) would end it later.
      await waitFor(async () => ((await waiting()) === 0 ? true : null), { timeoutMs: 1_000, what: 'the abandoned search cancelled' });
    } finally {
      await locker.query('ROLLBACK');
      locker.release();
    }
  });
});

describe('admin logins', () => {
  it('failed logins are logged without their password and throttled per client: the 4th in a minute is 429, even with the right token', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const guarded = await startIngest({
      databaseUrl: db.url,
      prefix: testPrefix(),
      log,
      env: { ADMIN_USERNAME: 'operator', ADMIN_PASSWORD: 'correct horse battery', ADMIN_TOKEN: 'good-token-0123456789abcdef', ADMIN_LOGIN_FAILURES_PER_MINUTE: '3' },
    });
    try {
      const basic = (password: string) => ({ authorization: `Basic ${Buffer.from(`operator:${password}`).toString('base64')}` });
      const statuses: number[] = [];
      for (const password of ['guess-one-secret', 'guess-two-secret', 'guess-three-secret', 'guess-four-secret'])
        statuses.push((await fetch(`${guarded.url}/admin/api/pauses`, { headers: basic(password) })).status);
      expect(statuses).toEqual([401, 401, 401, 429]);
      const locked = await fetch(`${guarded.url}/admin/api/pauses`, { headers: { authorization: 'Bearer good-token-0123456789abcdef' } });
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
      const failures = lines.filter((l) => l.includes('admin login failed'));
      expect(failures).toHaveLength(3);
      expect(JSON.parse(failures[0]!)).toMatchObject({ user: 'operator', scheme: 'basic', client: '127.0.0.1', failures: 1 });
      expect(lines.join('\n')).not.toMatch(/guess-|correct horse|good-token/);
    } finally {
      await guarded.close();
    }
  });

  it('a row id up to 2^53-1 is an id; one past it is refused', async () => {
    const get = (path: string) => fetch(`${ingest.url}${path}`, { headers: { authorization: `Bearer ${USERS[0]!.token}` } });
    expect((await get('/admin/api/events?before=9007199254740991&limit=1')).status).toBe(200);
    expect((await get('/admin/api/events?before=9007199254740992')).status).toBe(400);
    expect((await get('/admin/api/events/9007199254740991')).status).toBe(404);
  });
});
