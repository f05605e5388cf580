/**
 * The third attack round (issue 63): one scenario per finding, against the processes of a
 * checkout (`--root` for the release before), each printing what it did. The figures are for
 * reading; the tests assert the bounds (test/admin-budget.test.ts, outbound-guard,
 * destinations, backfill-bounds, metrics, failure-notify, cli-output, secrets-canary).
 *
 *   admin-searches        F1: 1,000,000 stored events; 10, then 50 clients repeating slow payload
 *                         searches (and bulk previews) with one read-only token, beside signed
 *                         deliveries one at a time and in bursts: their answers and times,
 *                         /readyz, the searches' answers
 *   destination-addresses F2: a worker started with a destination (and FAILURE_NOTIFY_URL) at
 *                         169.254.169.254 in each IPv4 and IPv6 form: started or refused, and
 *                         whether a request reached a metadata stand-in on 169.254.169.254 (the
 *                         address is added to `lo` when this process may; said when not)
 *   destination-redirects F3: a destination that follows redirects, its service answering 302
 *                         to the metadata stand-in, 302 to another origin, 301 to a GET, 25 hops
 *   header-crlf           F4: a destination header value with a line break around a canary: where
 *                         the canary went (worker output, rows)
 *   paddle-next           F5: `oncehook backfill paddle` against an API whose next link is on
 *                         another host: requests and keys that host received
 *   worker-labels         F6: 300 signed events of made-up types through a worker whose
 *                         destination takes every type: the worker's /metrics series and size
 *   backfill-unbounded    F7: an API answering has_more forever (30 s), then one 300 MB page:
 *                         calls made, the command's peak RSS
 *   notify-stall          F8: 10 failure notifications to a receiver that never answers: how
 *                         long a stuck run waits for the reconciler meanwhile
 *   terminal-escapes      F9: an event type holding escape sequences: raw ESC bytes in `list`
 *   admin-logins          F10: 100 wrong passwords from one address: answers, log lines; the
 *                         largest row id as `before`
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { paymentSucceeded, residentMb, sampleMax, type Service, signStripe, spawnService } from '@oncehook/harness';
import { count, env, type ScenarioRun, sql, startIngest } from './common.js';
import { deliveriesBesideAdmins, describeDeliveries, timedDeliveries } from './beside-admin.js';

const METADATA = '169.254.169.254';
const DESTINATION_SECRET = `whsec_${Buffer.from('attack-round-three-destination!!').toString('base64')}`;

interface StandIn {
  url: string;
  port: number;
  requests: { method: string; url: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

/** A real HTTP server that answers as `answer` says and records every request. */
async function standIn(answer: (req: IncomingMessage, res: ServerResponse, n: number) => void, host = '127.0.0.1', port = 0): Promise<StandIn> {
  const requests: StandIn['requests'] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(req, res, requests.length));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const workerEnv = (databaseUrl: string, queuePrefix: string, extra: Record<string, string>) => ({
  ...env(databaseUrl),
  QUEUE_PREFIX: queuePrefix,
  ONCEHOOK_HANDLERS: '',
  METRICS_PORT: '0',
  LEASE_MS: '2000',
  RECONCILE_INTERVAL_MS: '200',
  REQUEUE_AFTER_MS: '500',
  RETRY_BACKOFF_MS: '20',
  ...extra,
});

/** Starts a worker; resolves with it once ready, or with the reason it did not start. */
async function startWorker(root: string | undefined, environment: Record<string, string>): Promise<{ worker: Service; refused: string | null }> {
  const worker = spawnService('worker', environment, [], { root });
  try {
    await worker.waitFor(/worker ready/, 30_000);
    return { worker, refused: null };
  } catch {
    await worker.exited.catch(() => undefined);
    return {
      worker,
      refused:
        worker.lines
          .filter((l) => l.trim() !== '')
          .slice(-1)[0]
          ?.slice(0, 200) ?? 'exited',
    };
  }
}

/** Adds 169.254.169.254 to the loopback interface (root only), so a stand-in can listen where cloud metadata is. */
function claimMetadataAddress(): { added: boolean; release(): void; why?: string } {
  try {
    execFileSync('ip', ['addr', 'add', `${METADATA}/32`, 'dev', 'lo'], { stdio: 'pipe' });
    return { added: true, release: () => execFileSync('ip', ['addr', 'del', `${METADATA}/32`, 'dev', 'lo'], { stdio: 'pipe' }) };
  } catch (error) {
    const why = String((error as { stderr?: Buffer }).stderr ?? (error as Error).message).trim();
    if (/File exists/.test(why)) return { added: true, release: () => {} };
    return { added: false, release: () => {}, why };
  }
}

/** A metadata stand-in on 169.254.169.254:80 that hands out "credentials", or null when the address cannot be had. */
async function metadataStandIn(): Promise<{ server: StandIn | null; release(): Promise<void>; note: string }> {
  const address = claimMetadataAddress();
  if (!address.added) return { server: null, release: async () => {}, note: `(${METADATA} could not be added to lo: ${address.why}; only what the worker accepted is reported)` };
  const server = await standIn(
    (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"AccessKeyId":"ASIA-STOLEN","SecretAccessKey":"stolen"}'),
    METADATA,
    80,
  );
  return {
    server,
    note: '',
    async release() {
      await server.close();
      address.release();
    },
  };
}

async function waitUntil(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(100);
  }
  return false;
}

/** F1. */
const adminSearches: ScenarioRun = async (root, databaseUrl) => {
  const filled = 1_000_000;
  await sql(
    databaseUrl,
    `INSERT INTO oncehook.events (provider, kind, event_id, type, payload, state, received_at, updated_at)
     SELECT 'stripe', 'stripe', 'evt_fill_' || g, 'payment_intent.succeeded',
            jsonb_build_object('id', 'evt_fill_' || g, 'data', jsonb_build_object('object', jsonb_build_object('customer', 'cus_' || (g % 5000), 'amount', g, 'description', 'order ' || g))),
            'done', now() - (${filled} - g) * interval '1 second', now()
       FROM generate_series(1, ${filled}) g`,
  );
  await sql(databaseUrl, 'ANALYZE oncehook.events');
  // Read-only credentials: one token shared by every client (the finding's shape), and one per
  // client (what a per-user bound does not cover: only the admin's own pool does).
  const tokens = Array.from({ length: 50 }, (_, i) => `viewer${i}-readonly-attack-token-0123456789`);
  const { ingest, url } = await startIngest(root, databaseUrl, { ADMIN_TOKENS: tokens.map((t, i) => `viewer${i}=${t}`).join(','), ADMIN_READ_ONLY: 'true' });
  const lines: string[] = [`admin-searches: ${filled} events stored; no search: ${describeDeliveries(await timedDeliveries(url))}`];
  for (const [clients, users] of [
    [10, 1],
    [50, 1],
    [10, 10],
    [50, 50],
  ] as const) {
    const during = await deliveriesBesideAdmins(url, clients, tokens.slice(0, users), 'search');
    lines.push(`  ${clients} clients searching with ${users === 1 ? 'one token' : `${users} tokens`}: ${during}`);
  }
  await ingest.stop();
  return lines.join('\n');
};

/** F2. */
const destinationAddresses: ScenarioRun = async (root, databaseUrl) => {
  const metadata = await metadataStandIn();
  const lines: string[] = [`destination-addresses: ${metadata.note}`];
  try {
    const forms = [
      `http://${METADATA}/latest/meta-data/`,
      `http://[::ffff:${METADATA}]/latest/meta-data/`,
      'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
      'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/',
      'http://[::a9fe:a9fe]/x',
    ];
    for (const [i, form] of forms.entries()) {
      const prefix = `attack-f2-${i}-${randomBytes(3).toString('hex')}`;
      const ingestOf = await startIngest(root, databaseUrl, { QUEUE_PREFIX: prefix });
      const before = metadata.server?.requests.length ?? 0;
      const { worker, refused } = await startWorker(root, workerEnv(databaseUrl, prefix, { DESTINATION_URL: form, DESTINATION_SECRET, MAX_ATTEMPTS: '1' }));
      if (refused === null) {
        const delivery = signStripe(paymentSucceeded(`evt_f2_${i}_${randomBytes(3).toString('hex')}`));
        await fetch(`${ingestOf.url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
        await sleep(3_000);
      }
      const hits = (metadata.server?.requests.length ?? 0) - before;
      lines.push(
        `  DESTINATION_URL=${form}: worker ${refused === null ? 'STARTED' : `refused (${refused})`}; requests that reached ${METADATA}: ${metadata.server ? hits : 'n/a'}`,
      );
      await worker.stop();
      await ingestOf.ingest.stop();
    }
    const notify = await startWorker(
      root,
      workerEnv(databaseUrl, `attack-f2n-${randomBytes(3).toString('hex')}`, { FAILURE_NOTIFY_URL: 'http://[::ffff:a9fe:a9fe]/x', FAILURE_NOTIFY_SECRET: DESTINATION_SECRET }),
    );
    lines.push(`  FAILURE_NOTIFY_URL=http://[::ffff:a9fe:a9fe]/x: worker ${notify.refused === null ? 'STARTED' : `refused (${notify.refused})`}`);
    await notify.worker.stop();
  } finally {
    await metadata.release();
  }
  return lines.join('\n');
};

/** F3. */
const destinationRedirects: ScenarioRun = async (root, databaseUrl) => {
  const metadata = await metadataStandIn();
  const other = await standIn((_req, res) => res.writeHead(200).end('{"ok":true}'));
  let route = '';
  const service = await standIn((req, res) => {
    if (route === 'metadata') return res.writeHead(302, { location: `http://${METADATA}/latest/meta-data/iam` }).end();
    if (route === 'metadata-307') return res.writeHead(307, { location: `http://[::ffff:${METADATA}]/latest/meta-data/iam` }).end();
    if (route === 'other') return res.writeHead(302, { location: `${other.url}/elsewhere` }).end();
    if (route === 'to-get') return req.method === 'POST' ? res.writeHead(301, { location: '/hooks/moved' }).end() : res.writeHead(200).end('{"seen":"GET"}');
    const hop = Number(/hop=(\d+)/.exec(req.url ?? '')?.[1] ?? 0);
    res.writeHead(307, { location: `/hooks?hop=${hop + 1}` }).end();
  });
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-attack-f3-'));
  const lines = [`destination-redirects: ${metadata.note}`];
  try {
    await writeFile(
      path.join(dir, 'destinations.json'),
      JSON.stringify({ destinations: [{ name: 'crm', url: `${service.url}/hooks`, secretEnv: 'S', followRedirects: true, headers: { 'X-Api-Key': 'crm-secret-key-4242' } }] }),
    );
    const prefix = `attack-f3-${randomBytes(3).toString('hex')}`;
    const { ingest, url } = await startIngest(root, databaseUrl, { QUEUE_PREFIX: prefix });
    const { worker, refused } = await startWorker(
      root,
      workerEnv(databaseUrl, prefix, { ONCEHOOK_DESTINATIONS_FILE: path.join(dir, 'destinations.json'), S: DESTINATION_SECRET, MAX_ATTEMPTS: '1' }),
    );
    if (refused) throw new Error(`the worker did not start: ${refused}`);
    const runOf = async (eventId: string) =>
      (
        await sql<{ state: string; last_error: string | null }>(
          databaseUrl,
          `SELECT r.state, r.last_error FROM oncehook.handler_runs r JOIN oncehook.events e ON e.id = r.event_row_id WHERE e.event_id = $1 AND r.handler = 'crm'`,
          [eventId],
        )
      )[0];
    for (const [name, what] of [
      ['metadata', `302 to http://${METADATA}/latest/meta-data/iam`],
      ['metadata-307', `307 to http://[::ffff:${METADATA}]/latest/meta-data/iam`],
      ['other', '302 to another origin'],
      ['to-get', '301 to the same service (fetch resends the POST as a GET, answered 200)'],
      ['loop', '307 forever'],
    ] as const) {
      route = name;
      const eventId = `evt_f3_${name}_${randomBytes(3).toString('hex')}`;
      const [metaBefore, otherBefore, serviceBefore] = [metadata.server?.requests.length ?? 0, other.requests.length, service.requests.length];
      const delivery = signStripe(paymentSucceeded(eventId));
      await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
      await waitUntil(async () => ['done', 'failed'].includes((await runOf(eventId))?.state ?? ''), 15_000);
      const run = await runOf(eventId);
      const leaked = other.requests.slice(otherBefore).filter((r) => r.headers['x-api-key'] !== undefined).length;
      lines.push(
        `  ${what}: run ${run?.state ?? 'none'}${run?.last_error ? ` (${run.last_error.slice(0, 160)})` : ''}; hops to the service ${service.requests.length - serviceBefore}; to ${METADATA}: ${metadata.server ? metadata.server.requests.length - metaBefore : 'n/a'}; to the other origin ${other.requests.length - otherBefore}, carrying X-Api-Key ${leaked}`,
      );
    }
    await worker.stop();
    await ingest.stop();
  } finally {
    await service.close();
    await other.close();
    await metadata.release();
    await rm(dir, { recursive: true, force: true });
  }
  return lines.join('\n');
};

/** F4. */
const headerCrlf: ScenarioRun = async (root, databaseUrl) => {
  const canary = `cnry${randomBytes(10).toString('hex')}`;
  const service = await standIn((_req, res) => res.writeHead(200).end('{}'));
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-attack-f4-'));
  try {
    await writeFile(
      path.join(dir, 'destinations.json'),
      JSON.stringify({ destinations: [{ name: 'crm', url: `${service.url}/hooks`, secretEnv: 'S', headers: { 'X-Api-Key': `${canary}\r\nX-Injected: yes` } }] }),
    );
    const prefix = `attack-f4-${randomBytes(3).toString('hex')}`;
    const { ingest, url } = await startIngest(root, databaseUrl, { QUEUE_PREFIX: prefix, ADMIN_TOKEN: 'attack-admin-token-0123456789abcdef' });
    const { worker, refused } = await startWorker(
      root,
      workerEnv(databaseUrl, prefix, { ONCEHOOK_DESTINATIONS_FILE: path.join(dir, 'destinations.json'), S: DESTINATION_SECRET, MAX_ATTEMPTS: '1' }),
    );
    let page = '';
    if (refused === null) {
      const eventId = `evt_f4_${randomBytes(3).toString('hex')}`;
      const delivery = signStripe(paymentSucceeded(eventId));
      await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
      await sleep(4_000);
      page = await (await fetch(`${url}/admin/failures`, { headers: { authorization: 'Bearer attack-admin-token-0123456789abcdef' } })).text();
    }
    await worker.stop();
    await ingest.stop();
    const rows = (await sql<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM oncehook.handler_runs r WHERE r::text LIKE '%' || $1 || '%'`, [canary]))[0]?.n ?? 0;
    const output = worker.lines.filter((l) => l.includes(canary)).length;
    return `header-crlf: worker ${refused === null ? 'STARTED' : `refused: ${refused.replace(canary, '<CANARY>')}`}; the header value's canary in: worker output ${output} line(s), run rows ${rows}, the Failures page ${page.includes(canary) ? 'YES' : 'no'}; requests that reached the service ${service.requests.length}`;
  } finally {
    await service.close();
    await rm(dir, { recursive: true, force: true });
  }
};

/** F5. */
const paddleNext: ScenarioRun = async (root, databaseUrl) => {
  const key = `pdl_sdbx_apikey_${randomBytes(12).toString('hex')}`;
  const elsewhere = await standIn((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[],"meta":{"pagination":{"next":null,"has_more":false}}}'),
  );
  const api = await standIn((_req, res) =>
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ data: [], meta: { pagination: { next: `${elsewhere.url}/notifications?after=ntf_1`, has_more: true } } })),
  );
  try {
    const cli = spawnService(
      'cli',
      { ...env(databaseUrl), PADDLE_WEBHOOK_SECRET: 'pdl_ntfset_attack_0123456789abcdef', PADDLE_API_KEY: key, PADDLE_API_BASE: api.url },
      ['backfill', 'paddle', '--since', '24h'],
      { root },
    );
    const { code } = await cli.exited;
    const withKey = elsewhere.requests.filter((r) => String(r.headers.authorization ?? '').includes(key)).length;
    return `paddle-next: the command exited ${code} (${cli.lines
      .filter((l) => l.trim())
      .slice(-1)[0]
      ?.slice(0, 140)}); the other host received ${elsewhere.requests.length} request(s), ${withKey} carrying the Paddle key`;
  } finally {
    await api.close();
    await elsewhere.close();
  }
};

/** F6. */
const workerLabels: ScenarioRun = async (root, databaseUrl) => {
  const service = await standIn((_req, res) => res.writeHead(200).end('{}'));
  try {
    const prefix = `attack-f6-${randomBytes(3).toString('hex')}`;
    const { ingest, url } = await startIngest(root, databaseUrl, { QUEUE_PREFIX: prefix });
    const { worker, refused } = await startWorker(root, workerEnv(databaseUrl, prefix, { DESTINATION_URL: `${service.url}/hooks`, DESTINATION_SECRET }));
    if (refused) throw new Error(`the worker did not start: ${refused}`);
    const metricsPort = Number(/worker metrics on (\d+)/.exec(worker.lines.find((l) => /worker metrics on \d+/.test(l)) ?? '')?.[1]);
    const metrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const series = (text: string) => text.split('\n').filter((l) => l.startsWith('webhook_events_processed_total{')).length;
    const before = await metrics();
    for (let i = 0; i < 300; i += 30) {
      await Promise.all(
        Array.from({ length: 30 }, async (_, j) => {
          const delivery = signStripe({ ...paymentSucceeded(`evt_f6_${i + j}_${randomBytes(3).toString('hex')}`), type: `made.up.${i + j}.${randomBytes(4).toString('hex')}` });
          await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
        }),
      );
    }
    await waitUntil(async () => service.requests.length >= 300, 60_000);
    const after = await metrics();
    await worker.stop();
    await ingest.stop();
    return `worker-labels: 300 made-up types, ${service.requests.length} forwarded; the worker's webhook_events_processed_total series ${series(before)} -> ${series(after)}; its /metrics ${(before.length / 1024).toFixed(1)} -> ${(after.length / 1024).toFixed(1)} KiB`;
  } finally {
    await service.close();
  }
};

/** F7. */
const backfillUnbounded: ScenarioRun = async (root, databaseUrl) => {
  let id = 0;
  const endless = await standIn((_req, res) => {
    const data = Array.from({ length: 10 }, (_, i) => paymentSucceeded(`evt_endless_${id + i}`));
    id += 10;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', url: '/v1/events', has_more: true, data }));
  });
  const cliEnv = (base: string) => ({ ...env(databaseUrl), STRIPE_API_KEY: 'rk_test_attackroundthree0001', STRIPE_API_BASE: base });
  const lines: string[] = [];
  try {
    const cli = spawnService('cli', cliEnv(endless.url), ['backfill', 'stripe', '--since', '24h', '--dry-run'], { root });
    const stopped = await Promise.race([cli.exited.then(() => true), sleep(30_000).then(() => false)]);
    if (!stopped) await cli.stop(5_000);
    lines.push(
      `backfill-unbounded: has_more forever: ${endless.requests.length} API calls, ${
        stopped
          ? `the command stopped by itself (${cli.lines
              .filter((l) => l.trim())
              .slice(-1)[0]
              ?.slice(0, 120)})`
          : 'still running after 30 s (stopped by this script)'
      }`,
    );
  } finally {
    await endless.close();
  }
  // One page of 300 MB, streamed (never held by this script).
  const huge = await standIn((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"object":"list","url":"/v1/events","has_more":false,"data":[{"id":"evt_huge","object":"event","type":"t","created":1,"data":{"object":{"padding":"');
    const chunk = 'x'.repeat(1024 * 1024);
    let sent = 0;
    const more = () => {
      while (sent < 300) {
        sent += 1;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end('"}}}]}');
    };
    more();
  });
  try {
    const cli = spawnService('cli', cliEnv(huge.url), ['backfill', 'stripe', '--since', '24h', '--dry-run'], { root });
    const rss = sampleMax(() => residentMb(cli.pid), 50);
    const stopped = await Promise.race([cli.exited.then(() => true), sleep(120_000).then(() => false)]);
    if (!stopped) await cli.stop(5_000);
    lines.push(
      `  one 300 MB page: the command's peak RSS ${rss.stop().toFixed(0)} MiB; ${cli.lines
        .filter((l) => l.trim())
        .slice(-1)[0]
        ?.slice(0, 140)}`,
    );
  } finally {
    await huge.close();
  }
  return lines.join('\n');
};

/** F8. */
const notifyStall: ScenarioRun = async (root, databaseUrl) => {
  const silent = await standIn(() => {});
  try {
    // Ten runs failed with ten different causes: ten failure groups to notify.
    const events = await sql<{ id: number }>(
      databaseUrl,
      `INSERT INTO oncehook.events (provider, kind, event_id, type, payload, state) SELECT 'stripe', 'stripe', 'evt_f8_' || g, 't', '{}', 'failed' FROM generate_series(1, 10) g RETURNING id`,
    );
    const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
    for (const [i, e] of events.entries()) {
      await sql(
        databaseUrl,
        `INSERT INTO oncehook.handler_runs (event_row_id, handler, state, attempts, last_error, error_shape) VALUES ($1, 'ledger', 'failed', 1, $2, oncehook.error_shape($2))`,
        [e.id, `PermanentError: refused by ${words[i]}`],
      );
    }
    const prefix = `attack-f8-${randomBytes(3).toString('hex')}`;
    const { worker, refused } = await startWorker(
      root,
      workerEnv(databaseUrl, prefix, { FAILURE_NOTIFY_URL: `${silent.url}/failures`, FAILURE_NOTIFY_SECRET: DESTINATION_SECRET }),
    );
    if (refused) throw new Error(`the worker did not start: ${refused}`);
    await waitUntil(async () => silent.requests.length > 0, 30_000);
    // A run whose worker died meanwhile (lease expired): how long until a pass takes it back?
    const stuck = await sql<{ id: number }>(
      databaseUrl,
      `WITH e AS (INSERT INTO oncehook.events (provider, kind, event_id, type, payload, state) VALUES ('stripe', 'stripe', 'evt_f8_stuck', 't', '{}', 'processing') RETURNING id)
       INSERT INTO oncehook.handler_runs (event_row_id, handler, state, attempts, lease_token, lease_until) SELECT id, 'gone', 'processing', 1, gen_random_uuid(), now() - interval '1 second' FROM e RETURNING id`,
    );
    const started = Date.now();
    const taken = await waitUntil(
      async () => (await sql<{ state: string }>(databaseUrl, 'SELECT state FROM oncehook.handler_runs WHERE id = $1', [stuck[0]!.id]))[0]?.state !== 'processing',
      90_000,
    );
    const waited = Date.now() - started;
    await worker.stop();
    return `notify-stall: 10 notifications to a receiver that never answers (${silent.requests.length} tried so far); a run with an expired lease was taken back after ${taken ? `${(waited / 1000).toFixed(1)} s` : 'more than 90 s'} (RECONCILE_INTERVAL_MS=200)`;
  } finally {
    await silent.close();
  }
};

/** F9. */
const terminalEscapes: ScenarioRun = async (root, databaseUrl) => {
  const hostile = 'invoice.paid\u001b[2J\u001b[H\u001b[32mall good\u001b[0m';
  const [event] = await sql<{ id: number }>(
    databaseUrl,
    `INSERT INTO oncehook.events (provider, kind, event_id, type, payload, state) VALUES ('stripe', 'stripe', 'evt_f9', $1, '{}', 'failed') RETURNING id`,
    [hostile],
  );
  await sql(
    databaseUrl,
    `INSERT INTO oncehook.handler_runs (event_row_id, handler, state, attempts, last_error, error_shape) VALUES ($1, 'ledger', 'failed', 1, $2, oncehook.error_shape($2))`,
    [event!.id, `PermanentError: declined \u001b]0;owned\u0007${hostile}`],
  );
  const counts: string[] = [];
  for (const args of [['list', '--state', 'failed'], ['show', 'stripe/evt_f9'], ['failures']]) {
    const cli = spawnService('cli', env(databaseUrl), args, { root });
    await cli.exited;
    const text = cli.lines.join('\n');
    counts.push(`${args[0]} ${(text.match(/[\u001b\u0007]/g) ?? []).length}`);
  }
  return `terminal-escapes: raw ESC and BEL bytes printed by oncehook ${counts.join(', ')}`;
};

/** F10. */
const adminLogins: ScenarioRun = async (root, databaseUrl) => {
  const { ingest, url } = await startIngest(root, databaseUrl, { ADMIN_USERNAME: 'operator', ADMIN_PASSWORD: 'correct horse battery', ADMIN_TOKEN: 'good-admin-token-0123456789' });
  // The largest row id as a page's `before` (first: a lockout below would answer it 429).
  const before = await fetch(`${url}/admin/api/events?before=9007199254740991&limit=1`, { headers: { authorization: 'Bearer good-admin-token-0123456789' } });
  await before.arrayBuffer();
  const answers: { status: number }[] = [];
  for (let i = 0; i < 100; i += 1) {
    const response = await fetch(`${url}/admin/api/pauses`, { headers: { authorization: `Basic ${Buffer.from(`operator:guess-${i}`).toString('base64')}` } });
    await response.arrayBuffer();
    answers.push({ status: response.status });
  }
  const locked = await fetch(`${url}/admin/api/pauses`, { headers: { authorization: 'Bearer good-admin-token-0123456789' } });
  await ingest.stop();
  const logged = ingest.lines.filter((l) => /admin login failed/.test(l));
  const leaked = ingest.lines.filter((l) => /guess-\d/.test(l)).length;
  return `admin-logins: 100 wrong passwords from one address: ${JSON.stringify(count(answers))}; ${logged.length} 'admin login failed' log lines (passwords in the log: ${leaked}); the right token from that address then: ${locked.status}; before=9007199254740991 -> ${before.status}`;
};

export const ROUND_THREE = {
  'admin-searches': adminSearches,
  'destination-addresses': destinationAddresses,
  'destination-redirects': destinationRedirects,
  'header-crlf': headerCrlf,
  'paddle-next': paddleNext,
  'worker-labels': workerLabels,
  'backfill-unbounded': backfillUnbounded,
  'notify-stall': notifyStall,
  'terminal-escapes': terminalEscapes,
  'admin-logins': adminLogins,
} satisfies Record<string, ScenarioRun>;
