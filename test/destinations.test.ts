/**
 * Destinations (docs/destinations.md): each verified, claimed event forwarded to a team's own
 * HTTP service, signed with Standard Webhooks, with ONE key per event and destination.
 *
 * - The receivers of examples/receivers, in separate processes: the TypeScript one (the
 *   official `standardwebhooks` package, its dedupe table in Postgres) applies each of many
 *   events exactly once while each event is delivered 3 times by the provider (some at once), a
 *   worker is kill -9'd after a call was answered and before its step was recorded (the same
 *   webhook-id arrives again), and the receiver answers 503 for a stretch; the Python one
 *   (standard library only, sqlite) on a smaller run.
 * - In process, over real Postgres and a real HTTP receiver: a 400 is a dead letter at attempt
 *   1 with its status in the record; a re-drive after the fix sends the SAME key, a replay a
 *   NEW one; a paused destination holds its runs and the resume drains them once; Retry-After
 *   is honoured; the filter, the sources and type globs; the signature as the official
 *   library reads it (v1) and as Oncehook's own verifier reads it (v1a).
 * - Configuration mistakes stop start-up naming the field; a link-local URL is refused.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  createOperations,
  destinationAddressProblem,
  destinationHandler,
  HandlerRegistry,
  signatureHeaders,
  destinationPublicKey,
  loadDestinations,
  type Destination,
} from '@oncehook/core';
import { createScratchDatabase, deliver, killAllServices, paymentSucceeded, ROOT, signStripe, spawnService, waitFor } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { createStandardWebhooksSource } from '@oncehook/providers';
import { Webhook } from 'standardwebhooks';
import { CONFIG_VARIABLES, loadIngestConfig, loadWorkerConfig } from 'oncehook';
import { defineHandler } from '@oncehook/sdk';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, startIngest, T, testEnv, testPrefix, testQueues, testQueueStore } from './helpers/stack.js';

const SECRET = `whsec_${Buffer.from('destination-test-secret-32-bytes!').toString('base64')}`;
const TYPE = 'payment_intent.succeeded';

let db: TestDatabase;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await killAllServices();
  await db.drop();
});

/** Starts a receiver of examples/receivers; resolves with its URL once it listens. */
async function startReceiver(command: string, args: string[], env: Record<string, string>): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  const port = await waitFor(() => /receiver listening on (\d+)/.exec(output)?.[1] ?? (child.exitCode !== null ? 'exited' : null), {
    timeoutMs: 30_000,
    what: 'the receiver listening',
  });
  if (port === 'exited') throw new Error(`the receiver exited:\n${output}`);
  return { url: `http://127.0.0.1:${port}`, child, output: () => output };
}

/** A proxy in front of a receiver that answers 503 while `down` is set, and counts the calls it saw. */
async function startProxy(target: string): Promise<{ url: string; down: boolean; calls: number; close(): Promise<void> }> {
  const state = { down: false, calls: 0 };
  const server: Server = createServer((req, res) => {
    state.calls += 1;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      if (state.down) return res.writeHead(503).end('maintenance');
      try {
        const answer = await fetch(`${target}${req.url}`, { method: 'POST', body: Buffer.concat(chunks), headers: req.headers as Record<string, string> });
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' }).end(Buffer.from(await answer.arrayBuffer()));
      } catch {
        res.writeHead(502).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return Object.assign(state, {
    url,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  });
}

/** Delivers events 0..n-1 of a prefix, each 3 times (the first two at once), as a provider's retries would. */
async function deliverThrice(url: string, prefix: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, async (_, j) => {
        const event = paymentSucceeded(`${prefix}_${i + j}`, { account: `cus_${(i + j) % 7}`, amount: 100 + i + j });
        const [a, b] = await Promise.all([deliver(url, signStripe(event)), deliver(url, signStripe(event))]);
        const c = await deliver(url, signStripe(event));
        expect([a.status, b.status, c.status].sort()).toEqual([200, 200, 202]);
      }),
    );
  }
}

describe('receivers in other processes', () => {
  // A test's workers never outlive it: they would dispatch the next test's events (found by
  // their reconciler) with their own destinations only.
  afterEach(async () => {
    await killAllServices();
  });

  it('the TypeScript receiver (standardwebhooks + its own Postgres table) applies each event once: 3 deliveries each, a worker killed between the answer and the record, 503s for a stretch', {
    timeout: 240_000 + Number(process.env.ONCEHOOK_TEST_DESTINATION_EVENTS ?? 0) * 1_000,
  }, async () => {
    const receiverDb = await createScratchDatabase({ prefix: 'oncehook_receiver' });
    const pool = createPool(receiverDb.url, { max: 2 });
    try {
      const receiver = await startReceiver(process.execPath, ['--import', 'tsx', 'examples/receivers/typescript/receiver.ts'], {
        WEBHOOK_SECRET: SECRET,
        DATABASE_URL: receiverDb.url,
        PORT: '0',
      });
      const proxy = await startProxy(receiver.url);
      const prefix = testPrefix();
      const env = testEnv({
        databaseUrl: db.url,
        prefix,
        extra: {
          ONCEHOOK_HANDLERS: '',
          DESTINATION_NAME: 'billing-service',
          DESTINATION_URL: `${proxy.url}/webhooks`,
          DESTINATION_SECRET: SECRET,
          DESTINATION_TYPES: TYPE,
          MAX_ATTEMPTS: '50',
        },
      });
      const ingest = await startIngest({ databaseUrl: db.url, prefix });
      // Worker 1 dies (kill -9, from within) right after its first call was answered, before its step is recorded.
      const doomed = spawnService('worker', { ...env, ONCEHOOK_FAULTS: 'worker.after-external-call:crash' });
      await doomed.waitFor(/worker ready/);
      // 60 in the suite; the 1,000: ONCEHOOK_TEST_DESTINATION_EVENTS=1000 (docs/destinations.md, Tested).
      const N = Number(process.env.ONCEHOOK_TEST_DESTINATION_EVENTS ?? 60);
      const sending = deliverThrice(ingest.url, 'evt_dest', N);
      await doomed.exited;
      // The replacements, and a stretch of 503s while they work.
      const workers = [spawnService('worker', env), spawnService('worker', env)];
      await Promise.all(workers.map((w) => w.waitFor(/worker ready/)));
      proxy.down = true;
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      proxy.down = false;
      await sending;
      const done = async () => (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.runs} WHERE handler = 'billing-service' AND state = 'done'`)).rows[0]!.n;
      await waitFor(async () => ((await done()) === N ? true : null), { timeoutMs: 120_000 + N * 500, what: `${N} destination runs done` });

      // Each event applied once by the receiver, under the key Oncehook recorded for it.
      const { rows: applied } = await pool.query<{ webhook_id: string; event_id: string }>('SELECT c.webhook_id, c.event_id FROM credits c ORDER BY event_id');
      expect(applied).toHaveLength(N);
      expect(new Set(applied.map((r) => r.event_id)).size).toBe(N);
      const { rows: keys } = await db.pool.query<{ key: string; event_id: string }>(
        `SELECT s.idempotency_key AS key, e.event_id FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id JOIN ${T.events} e ON e.id = r.event_row_id WHERE r.handler = 'billing-service' ORDER BY e.event_id`,
      );
      expect(applied).toEqual(keys.map((k) => ({ webhook_id: k.key, event_id: k.event_id })));
      // The crash made a webhook-id arrive twice, and the 503s made calls fail: more calls than events.
      const { rows: attempts } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM oncehook.attempt_history a JOIN ${T.runs} r ON r.id = a.run_id WHERE r.handler = 'billing-service'`,
      );
      console.log(`[figure] destination: ${N} events x 3 deliveries -> ${proxy.calls} calls to the receiver over ${attempts[0]!.n} attempts, ${N} applied`);
      expect(proxy.calls).toBeGreaterThan(N);
      expect(doomed.lines.some((l) => l.includes('oncehook-fault worker.after-external-call'))).toBe(true);
      await proxy.close();
      await ingest.close();
    } finally {
      await pool.end();
      await receiverDb.drop();
    }
  });

  it('the TypeScript receiver survives its database connection dying mid-request (a Postgres restart or failover): 503, then the retry applies once', {
    timeout: 60_000,
  }, async () => {
    const receiverDb = await createScratchDatabase({ prefix: 'oncehook_receiver' });
    const receiver = await startReceiver(process.execPath, ['--import', 'tsx', 'examples/receivers/typescript/receiver.ts'], {
      WEBHOOK_SECRET: SECRET,
      DATABASE_URL: receiverDb.url,
      PORT: '0',
    });
    // The receiver's INSERT of this webhook-id waits behind an uncommitted one of ours, so its
    // connection is checked out and busy when its backend is terminated (what a restart does).
    const blocker = createPool(receiverDb.url, { max: 2 });
    const hold = await blocker.connect();
    try {
      await hold.query('BEGIN');
      await hold.query("INSERT INTO received_webhooks (webhook_id, type) VALUES ('msg_cut', 't')");
      const body = JSON.stringify({ id: 'msg_cut', source: 'stripe', type: 'payment_intent.succeeded', eventId: 'evt_cut', data: { data: { object: { amount: 7 } } } });
      const post = () => {
        const at = new Date();
        return fetch(`${receiver.url}/webhooks`, {
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/json',
            'webhook-id': 'msg_cut',
            'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
            'webhook-signature': new Webhook(SECRET).sign('msg_cut', at, body),
          },
        });
      };
      const first = post();
      const waiting = await waitFor(
        async () =>
          (
            await blocker.query<{ pid: number }>(
              "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'INSERT INTO received_webhooks%' AND wait_event_type = 'Lock'",
            )
          ).rows[0]?.pid ?? null,
        { timeoutMs: 20_000, what: "the receiver's INSERT waiting on the lock" },
      );
      await blocker.query('SELECT pg_terminate_backend($1)', [waiting]);
      expect((await first).status).toBe(503);
      await hold.query('ROLLBACK');
      const retry = await post();
      expect({ status: retry.status, body: await retry.json() }).toEqual({ status: 200, body: { applied: true } });
      expect(receiver.child.exitCode, receiver.output()).toBeNull();
      expect((await blocker.query('SELECT event_id, amount FROM credits')).rows).toEqual([{ event_id: 'evt_cut', amount: 7 }]);
    } finally {
      hold.release();
      await blocker.end();
      receiver.child.kill('SIGKILL');
      await receiverDb.drop();
    }
  });

  it('the Python receiver (standard library only) verifies and applies each event once', { timeout: 120_000 }, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-py-receiver-'));
    try {
      const receiver = await startReceiver('python3', ['examples/receivers/python/receiver.py'], { WEBHOOK_SECRET: SECRET, DATABASE: path.join(dir, 'receiver.db'), PORT: '0' });
      const prefix = testPrefix();
      const env = testEnv({
        databaseUrl: db.url,
        prefix,
        extra: { ONCEHOOK_HANDLERS: '', DESTINATION_NAME: 'py-service', DESTINATION_URL: receiver.url, DESTINATION_SECRET: SECRET, DESTINATION_SOURCES: 'stripe' },
      });
      const ingest = await startIngest({ databaseUrl: db.url, prefix });
      const worker = spawnService('worker', env);
      await worker.waitFor(/worker ready/);
      const N = 10;
      await deliverThrice(ingest.url, 'evt_py', N);
      await waitFor(
        async () =>
          (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.runs} WHERE handler = 'py-service' AND state = 'done'`)).rows[0]!.n === N ? true : null,
        { timeoutMs: 60_000, what: `${N} runs done` },
      );
      // Its answers were recorded: applied once each (200, {"applied": true}).
      const { rows } = await db.pool.query<{ result: { status: number; excerpt: string } }>(
        `SELECT s.result FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id WHERE r.handler = 'py-service'`,
      );
      expect(rows.map((r) => r.result)).toEqual(Array.from({ length: N }, () => expect.objectContaining({ status: 200, excerpt: '{"applied": true}' })));
      // It says what each call did, one line each, with the amount the event carries.
      const said = receiver
        .output()
        .split('\n')
        .filter((l) => l.includes('applied: credited'));
      expect(said).toHaveLength(N);
      expect(said[0]).toMatch(/^payment_intent\.succeeded evt_py_\d+ \(webhook-id \S+\): applied: credited 1\d\d$/);
      // An invoice's amount is its amount_paid (not 0, finding 7 of issue 64).
      const invoice = { id: 'evt_py_invoice', object: 'event', type: 'invoice.paid', created: Math.floor(Date.now() / 1000), data: { object: { id: 'in_py', amount_paid: 2000 } } };
      expect((await deliver(ingest.url, signStripe(invoice))).status).toBe(202);
      await waitFor(() => (receiver.output().includes('invoice.paid evt_py_invoice') ? true : null), { timeoutMs: 30_000, what: 'the invoice applied' });
      expect(receiver.output()).toMatch(/invoice\.paid evt_py_invoice \(webhook-id \S+\): applied: credited 2000/);
      await ingest.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('delivery semantics, in process', () => {
  /** A receiver that answers what `answer` says and records what it got. */
  let calls: { headers: IncomingMessage['headers']; body: string }[] = [];
  let answer: (n: number) => { status: number; headers?: Record<string, string>; body?: string } = () => ({ status: 200, body: '{"ok":true}' });
  let receiver: Server;
  let url: string;
  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        calls.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        const a = answer(calls.length);
        res.writeHead(a.status, a.headers ?? {}).end(a.body ?? '');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hooks`;
  });
  afterAll(async () => {
    receiver.closeAllConnections();
    await new Promise((resolve) => receiver.close(resolve));
  });
  beforeEach(() => {
    calls = [];
    answer = () => ({ status: 200, body: '{"ok":true}' });
  });

  let n = 0;
  const newEvent = async (payload: Record<string, unknown> = {}) => {
    n += 1;
    const eventId = `evt_sem_${n}`;
    return { rowId: await claimStripe(db.pool, eventId, TYPE, { data: { object: { currency: 'usd', customer: 'cus_1', amount: 500 } }, ...payload }), eventId };
  };
  const destination = (extra: Record<string, unknown> = {}): Destination =>
    loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: '', DESTINATION_URL: url, DESTINATION_SECRET: SECRET, DESTINATION_NAME: 'svc', ...extra })[0]!;

  it('a 400 is a dead letter at attempt 1 with its status; a re-drive after the fix sends the SAME key; a replay a NEW one', async () => {
    const dest = destination();
    const e = engine(db.pool, [destinationHandler(dest)]);
    const ops = createOperations({ pool: db.pool, queries: q, queue: testQueues(testQueueStore(db.url, testPrefix()), testPrefix()) });
    answer = () => ({ status: 400, body: '{"error":"unknown customer"}' });
    const ev = await newEvent();
    const job = await e.processJob(dispatchJob(ev.rowId, ev.eventId));
    expect(job.kind === 'runs' ? job.runs : []).toMatchObject([{ kind: 'failed' }]);
    const run = (await q.getRuns(db.pool, ev.rowId))[0]!;
    expect(run).toMatchObject({
      state: 'failed',
      attempts: 1,
      lastError: expect.stringMatching(/PermanentError: destination "svc" answered 400 in \d+ ms: \{"error":"unknown customer"\}/),
    });
    const firstKey = calls[0]!.headers['webhook-id'];
    expect(calls[0]!.headers['idempotency-key']).toBe(firstKey);
    // The operator finds it by the destination's name; --handler beside it is refused.
    const cliEnv = testEnv({ databaseUrl: db.url, prefix: testPrefix() });
    const [found, other, both] = [
      spawnService('cli', cliEnv, ['list', '--destination', 'svc', '--state', 'failed']),
      spawnService('cli', cliEnv, ['list', '--destination', 'other-service']),
      spawnService('cli', cliEnv, ['list', '--destination', 'svc', '--handler', 'svc']),
    ];
    expect((await found.exited).code, found.lines.join('\n')).toBe(0);
    expect(found.lines.join('\n')).toMatch(new RegExp(`stripe/${ev.eventId} .* svc:failed\\n.*svc last error: PermanentError: destination "svc" answered 400`));
    expect((await other.exited).code).toBe(0);
    expect(other.lines.join('\n')).not.toContain(ev.eventId);
    expect((await both.exited).code).toBe(2);
    expect(both.lines.join('\n')).toContain('--handler and --destination name the same thing');

    answer = () => ({ status: 200, body: 'ok' });
    expect(await ops.redrive(ev.rowId, {}, 'test', 'the receiver is fixed')).toMatchObject({ ok: true });
    await e.processJob({ ...dispatchJob(ev.rowId, ev.eventId), handler: 'svc', attempt: 0 });
    expect(calls[1]!.headers['webhook-id']).toBe(firstKey);
    expect((await q.getRuns(db.pool, ev.rowId))[0]!.state).toBe('done');

    expect(await ops.replay(ev.rowId, { handler: 'svc', allSteps: true, dryRun: false }, 'test', 'send it again on purpose')).toMatchObject({ ok: true });
    await e.processJob({ ...dispatchJob(ev.rowId, ev.eventId), handler: 'svc', generation: 1, attempt: 0 });
    expect(calls[2]!.headers['webhook-id']).not.toBe(firstKey);
    // The body is the envelope, the same bytes for one key: the event, its source, type and times.
    expect(JSON.parse(calls[1]!.body)).toMatchObject({
      id: firstKey,
      destination: 'svc',
      source: 'stripe',
      type: TYPE,
      eventId: ev.eventId,
      generation: 0,
      data: { id: ev.eventId },
    });
  });

  it('408, 409, 425, 429 and 5xx are retried (Retry-After honoured); a timeout too; a redirect is a dead letter unless followed', async () => {
    const e = engine(db.pool, [destinationHandler(destination({ DESTINATION_TIMEOUT_MS: '300' }))], { retry: { maxAttempts: 10, backoffMs: 1 } });
    for (const status of [408, 409, 425, 429, 500, 503]) {
      answer = () => ({ status, headers: status === 429 ? { 'retry-after': '7' } : ({} as Record<string, string>) });
      const ev = await newEvent();
      const job = await e.processJob(dispatchJob(ev.rowId, ev.eventId));
      const [run] = job.kind === 'runs' ? job.runs : [];
      expect(run, String(status)).toMatchObject({ kind: 'retry' });
      if (status === 429) expect((run as { delayMs: number }).delayMs).toBeGreaterThanOrEqual(7_000);
    }
    answer = () => ({ status: 301, headers: { location: 'https://elsewhere.example/hooks' } });
    const moved = await newEvent();
    await e.processJob(dispatchJob(moved.rowId, moved.eventId));
    expect((await q.getRuns(db.pool, moved.rowId))[0]).toMatchObject({ state: 'failed', lastError: expect.stringContaining('redirects are not followed') });
  });

  it('followRedirects: a 307 is followed as a POST, without the configured headers once it leaves the origin; a 302 and a metadata hop (any form) are dead letters', async () => {
    const elsewhere: { headers: IncomingMessage['headers']; method: string }[] = [];
    const other = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        elsewhere.push({ headers: req.headers, method: req.method ?? '' });
        res.writeHead(200).end('{"ok":"moved"}');
      });
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', () => resolve()));
    const otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}/moved`;
    try {
      const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-dest-redirect-'));
      await writeFile(
        path.join(dir, 'd.json'),
        JSON.stringify({ destinations: [{ name: 'svc', url, secretEnv: 'S', followRedirects: true, headersEnv: { 'X-Api-Key': 'CRM_KEY' } }] }),
      );
      const [dest] = loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: path.join(dir, 'd.json'), S: SECRET, CRM_KEY: 'crm-key-7c1d2e' });
      await rm(dir, { recursive: true, force: true });
      const e = engine(db.pool, [destinationHandler(dest!)]);
      answer = () => ({ status: 307, headers: { location: otherUrl } });
      const moved = await newEvent();
      await e.processJob(dispatchJob(moved.rowId, moved.eventId));
      expect((await q.getRuns(db.pool, moved.rowId))[0]).toMatchObject({ state: 'done' });
      expect(calls.at(-1)!.headers['x-api-key']).toBe('crm-key-7c1d2e');
      expect(elsewhere).toHaveLength(1);
      expect(elsewhere[0]!.method).toBe('POST');
      expect(elsewhere[0]!.headers['x-api-key']).toBeUndefined();
      expect(elsewhere[0]!.headers['webhook-id']).toBe(calls.at(-1)!.headers['webhook-id']);
      const cases: [Record<string, string>, RegExp][] = [
        [{ location: otherUrl }, /answered 302 towards .*only 307 and 308 keep it/],
        [{ location: 'http://169.254.169.254/latest/meta-data/' }, /169\.254\.169\.254, a link-local address .*allowLinkLocal/],
        [{ location: 'http://[::ffff:a9fe:a9fe]/latest/meta-data/' }, /carries the IPv4 address 169\.254\.169\.254/],
      ];
      for (const [i, [headers, message]] of cases.entries()) {
        answer = () => ({ status: i === 0 ? 302 : 307, headers });
        const ev = await newEvent();
        await e.processJob(dispatchJob(ev.rowId, ev.eventId));
        expect((await q.getRuns(db.pool, ev.rowId))[0], String(i)).toMatchObject({ state: 'failed', lastError: expect.stringMatching(message) });
      }
      expect(elsewhere).toHaveLength(1);
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('sources and type globs select the events; the filter skips the others with the reason recorded, no call made', async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), 'oncehook-dest-')), 'destinations.json');
    await writeFile(
      file,
      JSON.stringify({
        destinations: [
          {
            name: 'usd-only',
            url,
            secretEnv: 'S',
            sources: ['stripe'],
            types: ['payment_intent.*'],
            filter: [
              { path: 'data.object.currency', in: ['usd'] },
              { path: 'data.object.customer', exists: true },
            ],
          },
        ],
      }),
    );
    const [dest] = loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: file, S: SECRET });
    const handler = destinationHandler(dest!);
    expect(handler.selects('stripe', 'stripe', 'payment_intent.succeeded')).toBe(true);
    expect(handler.selects('stripe-eu', 'stripe', 'payment_intent.created')).toBe(true); // a kind matches every source of it
    expect(handler.selects('stripe', 'stripe', 'charge.refunded')).toBe(false);
    expect(handler.selects('github', 'github', 'payment_intent.succeeded')).toBe(false);
    const e = engine(db.pool, [handler]);
    const eur = await newEvent({ data: { object: { currency: 'eur', customer: 'cus_1' } } });
    await e.processJob(dispatchJob(eur.rowId, eur.eventId));
    expect(calls).toHaveLength(0);
    const { rows } = await db.pool.query(`SELECT s.name, s.result FROM ${T.steps} s JOIN ${T.runs} r ON r.id = s.run_id WHERE r.event_row_id = $1`, [eur.rowId]);
    expect(rows).toEqual([{ name: 'filtered-out', result: { filter: 'data.object.currency is "eur", not one of ["usd"]' } }]);
    const usd = await newEvent();
    await e.processJob(dispatchJob(usd.rowId, usd.eventId));
    expect(calls).toHaveLength(1);
  });

  it('a paused destination holds its runs (deliveries still accepted); the resume drains them, each once', async () => {
    const dest = destination();
    const e = engine(db.pool, [destinationHandler(dest)]);
    const store = testQueueStore(db.url, testPrefix());
    const prefix = testPrefix();
    const queue = testQueues(store, prefix);
    const ops = createOperations({ pool: db.pool, queries: q, queue });
    expect(await ops.pause({ scope: 'handler', name: 'svc' }, 'test', 'receiver migration')).toMatchObject({ ok: true });
    const events = [await newEvent(), await newEvent()];
    for (const ev of events) await e.processJob(dispatchJob(ev.rowId, ev.eventId));
    expect(calls).toHaveLength(0);
    expect(await ops.resume({ scope: 'handler', name: 'svc' }, 'test', 'done')).toMatchObject({ ok: true, released: 2 });
    const jobs = (await Promise.all(queue.shards.map((s) => s.getJobs(['waiting', 'prioritized'])))).flat();
    for (const job of jobs) await e.processJob(job.data);
    for (const job of jobs) await e.processJob(job.data); // a second copy of each job: nothing more
    expect(calls).toHaveLength(2);
    await queue.close();
  });

  it('the signature: the official library verifies v1; Oncehook’s own Standard Webhooks verifier verifies v1a with the whpk_ key', () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const dest = destination();
    const body = '{"id":"k1","data":{}}';
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signatureHeaders({ hmacKey: dest.hmacKey, signingKey: privateKey }, 'k1', body, timestamp);
    expect(() => new Webhook(SECRET).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(SECRET).verify(`${body} `, headers)).toThrow();
    const verifier = createStandardWebhooksSource({ name: 'v1a-check', secrets: [destinationPublicKey(privateKey)] });
    const verified = verifier.verify({ rawBody: Buffer.from(body), header: (name) => (headers as Record<string, string>)[name.toLowerCase()] ?? null, now: new Date() });
    expect(verified).toMatchObject({ event: { eventId: 'k1' } });
  });
});

describe('the admin', () => {
  it("the Destinations page and API show each destination's state, never its secret or headers", async () => {
    const dests = loadDestinations({
      DESTINATION_URL: 'https://billing.internal/webhooks/oncehook',
      DESTINATION_SECRET: SECRET,
      DESTINATION_NAME: 'billing-service',
    });
    const withHeader = [{ ...dests[0]!, headers: { Authorization: 'Bearer very-secret-token' } }];
    const token = 'admin-token-destinations-0123456789';
    const ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), env: { ADMIN_TOKEN: token }, destinations: withHeader });
    try {
      const api = await fetch(`${ingest.url}/admin/api/destinations`, { headers: { authorization: `Bearer ${token}` } });
      expect(api.status).toBe(200);
      expect(await api.json()).toEqual({
        destinations: [expect.objectContaining({ name: 'billing-service', url: 'https://billing.internal/webhooks/oncehook', inFlight: 0, deadLetters: 0, paused: null })],
      });
      const pageText = await (await fetch(`${ingest.url}/admin/destinations`, { headers: { authorization: `Bearer ${token}` } })).text();
      expect(pageText).toContain('billing-service');
      for (const secret of [SECRET, 'very-secret-token', Buffer.from('destination-test-secret-32-bytes!').toString('base64')]) expect(pageText).not.toContain(secret);
      expect((await fetch(`${ingest.url}/admin/api/destinations`)).status).toBe(401);
    } finally {
      await ingest.close();
    }
  });
});

describe('oncehook destinations', () => {
  it('lists each destination with its state (never a secret), and makes secrets and key pairs', async () => {
    const env = testEnv({
      databaseUrl: db.url,
      prefix: testPrefix(),
      extra: { DESTINATION_URL: 'https://billing.internal/hooks', DESTINATION_SECRET: SECRET, DESTINATION_NAME: 'cli-service' },
    });
    const [list, secret, pair] = [
      spawnService('cli', env, ['destinations']),
      spawnService('cli', env, ['destinations', '--new-secret']),
      spawnService('cli', env, ['destinations', '--new-signing-key']),
    ];
    for (const run of [list, secret, pair]) expect((await run.exited).code, run.lines.join('\n')).toBe(0);
    expect(list.lines.join('\n')).toMatch(
      /^cli-service {2}-> https:\/\/billing\.internal\/hooks\n {2}takes \* \*; signs v1 \(HMAC\)\n {2}0 in flight, 0 waiting, 0 dead letter\(s\)/m,
    );
    expect(list.lines.join('\n')).not.toContain(SECRET.slice(6));
    const made = secret.lines.find((l) => l.startsWith('whsec_'))!;
    expect(Buffer.from(made.slice(6), 'base64')).toHaveLength(32);
    const keys = pair.lines.join('\n');
    const privateKey = /whsk_\S+/.exec(keys)![0];
    const publicKey = /whpk_\S+/.exec(keys)![0];
    // The pair works: a v1a signature made with the private key verifies with the public one.
    const dest = loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: '', DESTINATION_URL: 'https://x.internal/h', DESTINATION_SECRET: SECRET })[0]!;
    const signingKey = (await import('@oncehook/core')).destinationSigningKey(privateKey);
    const headers = signatureHeaders({ hmacKey: dest.hmacKey, signingKey }, 'k2', '{}', Math.floor(Date.now() / 1000));
    const verifier = createStandardWebhooksSource({ name: 'pair-check', secrets: [publicKey] });
    expect(verifier.verify({ rawBody: Buffer.from('{}'), header: (name) => (headers as Record<string, string>)[name.toLowerCase()] ?? null, now: new Date() })).toMatchObject({
      event: { eventId: 'k2' },
    });
  });
});

describe('configuration: each mistake names its field', () => {
  const base = { DESTINATION_URL: 'https://billing.internal/hooks', DESTINATION_SECRET: SECRET };
  const cases: [string, Record<string, string | undefined>, RegExp][] = [
    [
      'no secret',
      { DESTINATION_URL: 'https://billing.internal/hooks' },
      /DESTINATION_\*: destination "forward": secretEnv: the environment variable DESTINATION_SECRET is not set/,
    ],
    ['a secret that is not whsec_ base64', { ...base, DESTINATION_SECRET: 'hunter2!' }, /secretEnv \(DESTINATION_SECRET\): must be whsec_ followed by base64/],
    ['a URL that is not one', { ...base, DESTINATION_URL: 'billing.internal/hooks' }, /destination "forward": url: the URL to POST each event to/],
    ['credentials in the URL', { ...base, DESTINATION_URL: 'https://user:pw@billing.internal/hooks' }, /url: carries credentials; put them in headersEnv/],
    ['a secret without a URL', { DESTINATION_SECRET: SECRET }, /DESTINATION_SECRET set without DESTINATION_URL/],
    ['a bad name', { ...base, DESTINATION_NAME: 'Billing Service' }, /destination "Billing Service": name: a destination name is 1-63 characters/],
  ];
  for (const [what, env, message] of cases) {
    it(what, () => expect(() => loadDestinations(env)).toThrow(message));
  }

  it("read with the processes' other settings: the worker's config refuses a mistake, ingest's keeps it for the admin page", () => {
    expect(loadWorkerConfig(base).destinations.map((d) => d.name)).toEqual(['forward']);
    expect(() => loadWorkerConfig({ ...base, DESTINATION_NAME: 'Billing Service' })).toThrow(/destination "Billing Service": name:/);
    expect(loadIngestConfig({ ...base, DESTINATION_NAME: 'Billing Service' }).destinations).toMatch(/destination "Billing Service": name:/);
    expect(CONFIG_VARIABLES.worker).toEqual(expect.arrayContaining(['DESTINATION_URL', 'DESTINATION_SECRET', 'ONCEHOOK_DESTINATIONS_FILE']));
  });

  it('registered like any handler: a destination named like a handler is refused, naming both', () => {
    const [forward] = loadDestinations(base);
    const handler = defineHandler({ name: 'forward', source: 'stripe', type: 'charge.refunded' }, async () => {});
    expect(() => new HandlerRegistry([handler]).add(destinationHandler(forward!), 'the destinations')).toThrow(
      /two handlers are named "forward" \(stripe charge.refunded and the destination "forward", the second from the destinations\)/,
    );
    // It takes the events its sources and type globs say, through the same lookup as a handler.
    const registry = new HandlerRegistry().add(destinationHandler({ ...forward!, types: ['invoice.*'] }));
    expect(registry.match('stripe', 'stripe', 'invoice.paid').map((h) => h.name)).toEqual(['forward']);
    expect(registry.match('stripe', 'stripe', 'charge.refunded')).toEqual([]);
  });

  it('a file: unknown fields, a filter path, a reserved header, two destinations of one name', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-dest-config-'));
    const load = async (destinations: unknown[]) => {
      await writeFile(path.join(dir, 'd.json'), JSON.stringify({ destinations }));
      return () => loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: path.join(dir, 'd.json'), S: SECRET });
    };
    const ok = { name: 'a', url: 'https://a.internal/h', secretEnv: 'S' };
    expect(await load([{ ...ok, retry: 3 }])).toThrow(/destination "a": \(the entry\): Unrecognized key: "retry"/);
    expect(await load([{ ...ok, filter: [{ path: 'data..x', equals: 1 }] }])).toThrow(/destination "a": filter\.0\.path: a JSON path is dot-separated keys/);
    expect(await load([{ ...ok, headers: { 'Webhook-Signature': 'x' } }])).toThrow(/headers\.Webhook-Signature: Oncehook sets this header itself/);
    expect(await load([ok, { ...ok }])).toThrow(/destination "a": name: already used by a destination/);
    expect(await load([{ ...ok, concurrency: { key: 'data.object.customer', limit: 0 } }])).toThrow(/concurrency/);
    await rm(dir, { recursive: true, force: true });
  });

  it('a URL whose host is link-local (cloud metadata) is refused, naming what to set; allowed when said so', async () => {
    // An address in the URL, in any form: refused when the configuration is read.
    for (const url of [
      'http://169.254.169.254/latest/meta-data',
      'http://[::ffff:169.254.169.254]/',
      'http://[::ffff:a9fe:a9fe]/',
      'http://[64:ff9b::a9fe:a9fe]/',
      'http://[fe80::1]/x',
    ]) {
      expect(() => loadDestinations({ DESTINATION_URL: url, DESTINATION_SECRET: SECRET }), url).toThrow(
        /destination "forward": url: .*a (link-local|unspecified|cloud metadata) address .* set allowLinkLocal: true/,
      );
    }
    const internal = loadDestinations({ DESTINATION_URL: 'http://127.0.0.1:4020/hooks', DESTINATION_SECRET: SECRET })[0]!;
    expect(await destinationAddressProblem(internal)).toBeNull(); // a service of yours on this host: fine
    const metadata = { ...internal, url: new URL('http://169.254.169.254/latest/meta-data') };
    expect(await destinationAddressProblem(metadata)).toMatch(/destination "forward": 169\.254\.169\.254, a link-local address .* set allowLinkLocal: true/);
    expect(await destinationAddressProblem({ ...metadata, allowLinkLocal: true })).toBeNull();
  });

  it('a header value with a line break or a control character is refused naming the field, never the value', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-dest-headers-'));
    const file = path.join(dir, 'd.json');
    const canary = 'sk_canary_5b0f3c1e9d';
    const ok = { name: 'crm', url: 'https://crm.internal/h', secretEnv: 'S' };
    const tries: [unknown, Record<string, string>, RegExp][] = [
      [{ ...ok, headers: { 'X-Api-Key': `${canary}\r\nX-Injected: 1` } }, {}, /destination "crm": headers\.X-Api-Key: the value contains a line break/],
      [{ ...ok, headersEnv: { Authorization: 'CRM_AUTH' } }, { CRM_AUTH: `Bearer ${canary}\n` }, /headersEnv\.Authorization: the value of CRM_AUTH contains a line break/],
      [{ ...ok, headers: { 'X-Api-Key': `${canary}\u0000` } }, {}, /headers\.X-Api-Key: the value contains a control character/],
      [{ ...ok, headers: { 'X-Api-Key': `${canary}\u2028` } }, {}, /outside Latin-1/],
    ];
    for (const [declaration, extra, message] of tries) {
      await writeFile(file, JSON.stringify({ destinations: [declaration] }));
      let thrown: unknown;
      try {
        loadDestinations({ ONCEHOOK_DESTINATIONS_FILE: file, S: SECRET, ...extra });
      } catch (error) {
        thrown = error;
      }
      expect((thrown as Error).message).toMatch(message);
      expect((thrown as Error).message).not.toContain(canary);
    }
    await rm(dir, { recursive: true, force: true });
  });
});
