/**
 * Backpressure and poison isolation at the edge (issue 10, findings 6 and 7), for real:
 *
 * - Postgres blackholed (a TCP port that stops answering, in front of the real database) under
 *   an ingest PROCESS: 1000 verified 200 KB deliveries are each answered 503 + Retry-After, cut
 *   by the claim deadline (CLAIM_TIMEOUT_MS) or by the circuit it opens, never left waiting for
 *   the database; RSS stays under 350 MiB, nothing is stored; when the path heals, the same
 *   deliveries are accepted. What is asserted is which deadline cut each answer (its message),
 *   not a wall-clock time, which a busy machine stretches.
 * - One poison payload among 54 concurrent deliveries is refused alone (400); the other 53 are
 *   accepted: a signed time out of range (refused at verification), and a payload Postgres
 *   refuses (a data exception in the batch statement, retried one by one).
 */
import { killAllServices, rawPosts, residentMb, sampleMax, send, signStripe, spawnService, startBlackhole, waitFor, type Blackhole, type Delivery } from '@oncehook/harness';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ingestUrl, startIngest, T, testEnv, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let blackhole: Blackhole;

beforeAll(async () => {
  db = await createTestDatabase();
  const target = new URL(db.url);
  blackhole = await startBlackhole({ host: target.hostname, port: Number(target.port || 5432) });
});
afterAll(async () => {
  await killAllServices();
  await blackhole.close();
  await db.drop();
});

async function rows(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
  return rows[0]?.n ?? -1;
}

function bigPayment(id: string): Delivery {
  return signStripe({
    id,
    object: 'event',
    type: 'payment_intent.succeeded',
    created: Math.floor(Date.now() / 1000),
    data: { object: { id: `pi_${id}`, amount: 100, currency: 'usd', metadata: { notes: 'n'.repeat(200_000) } } },
  });
}

async function timed(url: string, delivery: Delivery): Promise<{ status: number; ms: number; retryAfter: string | null }> {
  const [answer] = await rawPosts({ host: '127.0.0.1', port: Number(new URL(url).port), path: '/webhooks/stripe' }, [delivery]);
  return { status: answer!.status, ms: answer!.ms, retryAfter: /\r\nretry-after: (\d+)/i.exec(answer!.head)?.[1] ?? null };
}

/**
 * Which of ingest's bounds answered a 503, from its message: the claim deadline, the circuit
 * its timeouts opened, or (before the body, when the machine is too busy for the circuit to
 * open first) the in-flight body budget.
 */
function cutBy(head: string): 'claim deadline' | 'database unavailable' | 'body budget' | string {
  const message = /\r\n\r\n(\{.*\})/s.exec(head)?.[1] ?? '';
  if (message.includes(`the database did not answer within ${CLAIM_TIMEOUT_MS} ms`)) return 'claim deadline';
  // The same deadline, reached while the delivery waited for a batch and a connection.
  if (message.includes(`no database connection was free to record it within ${CLAIM_TIMEOUT_MS} ms`)) return 'claim deadline';
  if (message.includes('the database is unavailable')) return 'database unavailable';
  if (message.includes('too many deliveries in progress')) return 'body budget';
  return message || head.slice(0, 200);
}
const BOUNDS = ['claim deadline', 'database unavailable', 'body budget'];

const CLAIM_TIMEOUT_MS = 750;
const CONNECT_TIMEOUT_MS = 10_000;

it('Postgres blackholed: 1000 verified 200 KB deliveries each get 503, cut by the claim deadline or its circuit; RSS < 350 MiB; accepted once it heals', {
  timeout: 120_000,
}, async () => {
  const viaBlackhole = new URL(db.url);
  viaBlackhole.port = String(blackhole.port);
  // A connection attempt into the blackhole waits DATABASE_CONNECT_TIMEOUT_MS: 10 s here, far
  // longer than CLAIM_TIMEOUT_MS, so an answer that did not come from the claim deadline (or
  // the circuit it opened) would have waited for a connect. (At the 2 s default, batches
  // waiting for a new connection were answered at about 2 s even without the claim deadline:
  // mutant claim-deadline-off survived one run of the old, time-based version of this test.)
  const ingest = spawnService(
    'ingest',
    testEnv({
      databaseUrl: viaBlackhole.toString(),
      prefix: testPrefix(),
      extra: { LOG_LEVEL: 'info', DATABASE_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS), CLAIM_TIMEOUT_MS: String(CLAIM_TIMEOUT_MS) },
    }),
  );
  const url = await ingestUrl(ingest);
  // Healthy first: the pool holds open connections, which the outage will strand.
  for (let i = 0; i < 5; i += 1) expect((await timed(url, bigPayment(`evt_warm_${i}`))).status).toBe(202);

  blackhole.swallow();
  const deliveries = Array.from({ length: 1000 }, (_, i) => bigPayment(`evt_bh_${i}`));
  const before = residentMb(ingest.pid);
  const rss = sampleMax(() => residentMb(ingest.pid));
  // Raw sockets, all at once: the client's own cost stays out of the times (a provider's
  // deliveries come from other machines).
  const answers = (await rawPosts({ host: '127.0.0.1', port: Number(new URL(url).port), path: '/webhooks/stripe' }, deliveries)).map((a) => ({
    status: a.status,
    ms: a.ms,
    retryAfter: /\r\nretry-after: (\d+)/i.exec(a.head)?.[1] ?? null,
    cutBy: cutBy(a.head),
  }));
  const peak = rss.stop();
  const slowest = Math.max(...answers.map((a) => a.ms));
  const byStatus: Record<number, number> = {};
  for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
  const byCause: Record<string, number> = {};
  for (const a of answers) byCause[a.cutBy] = (byCause[a.cutBy] ?? 0) + 1;
  console.log(
    `[figure] Postgres blackholed, 1000 x 200 KB: answers ${JSON.stringify(byStatus)} (${JSON.stringify(byCause)}), slowest ${slowest} ms, ingest RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB`,
  );

  expect(byStatus).toEqual({ 503: 1000 });
  expect(answers.every((a) => a.retryAfter !== null)).toBe(true);
  // Every answer came from one of ingest's bounds: the claim deadline, the circuit its
  // timeouts opened (which then answers the rest at once), or the body budget; and at least
  // the first batches from the deadline itself (mutant claim-deadline-off: none does).
  expect(Object.keys(byCause)).toContain('claim deadline');
  expect(Object.keys(byCause).filter((cause) => !BOUNDS.includes(cause))).toEqual([]);
  // Nobody waited out a connection attempt into the blackhole: relative to the configured
  // connect timeout, which the deadline exists to cut short (a busy machine stretches the
  // answers, normally 1-2.5 s here, by far less than that).
  expect(slowest).toBeLessThan(CONNECT_TIMEOUT_MS);
  expect(peak).toBeLessThan(350);
  expect(await rows()).toBe(5);

  // The path heals: the circuit half-opens, a probe succeeds, deliveries are accepted again.
  blackhole.forward();
  // Connections opened during the outage stay dead (as after a real one) until their connect
  // timeout (CONNECT_TIMEOUT_MS, 10 s) drops them; the circuit then half-opens and a probe
  // closes it. Usually 1-5 s after the heal; a CI run beside a loaded hour once took more than
  // 20 s, so the bound is what the mechanism allows (timeouts of the stranded connections and
  // a probe after them), not a speed: the figure shows how long it took.
  const healStarted = Date.now();
  await waitFor(async () => ((await timed(url, bigPayment('evt_probe'))).status === 202 ? true : null), {
    timeoutMs: 3 * CONNECT_TIMEOUT_MS + 15_000,
    intervalMs: 250,
    what: 'ingest accepting again',
  });
  console.log(`[figure] accepting again ${Date.now() - healStarted} ms after the path healed`);
  // The provider's retries, 40 at a time (more at once would meet the in-flight body budget,
  // which answers 503 too: correctly). A 503 is retried as a provider would: on a busy machine
  // a batch of 40 x 200 KB can outlast the 750 ms claim deadline right after the heal (seen
  // in a run beside two CPU hogs and a whole suite), and the answer is then correctly a 503.
  // What is asserted is the behaviour: every delivery is accepted within a few retries, and
  // nothing but 202 and 503 is answered (and 200 to a retry whose earlier attempt was cut by
  // the deadline but committed after all: it is a duplicate then).
  for (let i = 0; i < 200; i += 40) {
    let pending = deliveries.slice(i, i + 40);
    for (let round = 1; pending.length > 0; round += 1) {
      const answers = await Promise.all(pending.map((d) => timed(url, d)));
      const allowed = round === 1 ? [202, 503] : [200, 202, 503];
      expect(answers.filter((a) => !allowed.includes(a.status))).toEqual([]);
      pending = pending.filter((_, j) => answers[j]!.status === 503);
      if (pending.length > 0 && round >= 10) throw new Error(`${pending.length} deliveries still answered 503 after ${round} rounds once Postgres healed`);
      if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  expect(await rows()).toBe(5 + 1 + 200);
  await ingest.stop();
});

it('a poison payload among 54 concurrent deliveries gets 400 alone; the other 53 are accepted', async () => {
  const ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix() });
  const start = await rows();
  try {
    const now = Math.floor(Date.now() / 1000);
    const good = (round: string, i: number) => signStripe({ id: `evt_${round}_${i}`, object: 'event', type: 't', created: now, data: { object: {} } });
    const poisons: Record<string, string> = {
      // Year 31 690 000: verified, then refused as a time (Postgres would refuse it: 22008).
      'created-1e15': `{"id":"evt_poison_a","object":"event","type":"t","created":1e15,"data":{"object":{}}}`,
      // JSON.parse makes it Infinity (Postgres: 22003 numeric out of range).
      'created-1e999999': `{"id":"evt_poison_b","object":"event","type":"t","created":1e999999,"data":{"object":{}}}`,
      // Verified and well-formed JSON, but jsonb refuses \u0000 (22P05): fails the batch statement.
      'nul-in-payload': `{"id":"evt_poison_c","object":"event","type":"t","created":${now},"data":{"object":{"note":"a\\u0000b"}}}`,
    };
    for (const [round, poison] of Object.entries(poisons)) {
      const deliveries = [...Array.from({ length: 26 }, (_, i) => good(round, i)), signStripe(poison), ...Array.from({ length: 27 }, (_, i) => good(round, 26 + i))];
      const answers = await Promise.all(deliveries.map((d) => send(ingest.url, 'stripe', d)));
      expect(answers[26], round).toMatchObject({ status: 400 });
      expect(
        answers.filter((a) => a.status === 202),
        round,
      ).toHaveLength(53);
    }
    expect(await rows()).toBe(start + 3 * 53);
  } finally {
    await ingest.close();
  }
});
