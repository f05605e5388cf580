/**
 * `npm run attack -- [--scenario all|<scenario>,...] [--root DIR]`
 *
 * Replays the resource attacks of issue 10 against an ingest PROCESS and prints what they did
 * to it (answers, answer times, memory, /metrics size). `--root` runs another checkout's ingest
 * (its own migrations and code) so a release can be measured before and after, side by side:
 *
 *   git worktree add /tmp/before <commit> && (cd /tmp/before && npm ci)
 *   npm run attack -- --root /tmp/before
 *   npm run attack
 *
 * Scenarios:
 *   slow-bodies  2000 raw connections, no signature header, each declaring 1 MiB and trickling
 *                128 KiB: answers, slowest close, ingest RSS, /healthz during the attack
 *   blackhole    Postgres behind a port that stops answering; 1000 verified 200 KB deliveries
 *                at once: answers, slowest answer, RSS
 *   labels       one captured GitHub delivery resent 2000 times under new delivery ids and
 *                made-up X-GitHub-Event names: rows created, /metrics series and size
 *   poison       one validly signed Stripe event with `created: 1e15` among 54 concurrent
 *                deliveries: answers
 *
 * Issue 24 (the second round):
 *   poison-numbers         F1: a signed Stripe event holding 4,200 x `1e131071` (38 KB; 550 MB
 *                          printed): its answer; then the same payload as an older version
 *                          stored it, and a worker started on it: did it live, what the run became
 *   fake-signature-bodies  F2: 17 sockets with a well-formed fake Stripe-Signature, each declaring
 *                          1 MiB and trickling; 98 real signed deliveries meanwhile: their answers
 *   delivery-log           F3: one Stripe event delivered 5,000 times: log rows, bytes of the log
 *   deep-nesting           F4: a signed 5,000-deep array: its answer; the admin page of it (as
 *                          stored before the limits): status and size, and whether ingest lived
 *   hmac-non-object        F5: an hmac source (id in a signed header) sent `[1,2]`, `null`, `42`
 *   pipelined              F6: a POST to an unknown source and a signed POST in one write: what
 *                          came back, and whether the second was stored
 *   liveness               F7: 4,000 deliveries at once; /healthz on the main port and on
 *                          HEALTH_PORT (when the checkout has it), probed from another process
 *
 * Issue 63 (the third round): admin-searches, destination-addresses, destination-redirects,
 *   header-crlf, paddle-next, worker-labels, backfill-unbounded, notify-stall, terminal-escapes,
 *   admin-logins (scripts/attack/round-three.ts says what each does)
 *
 * Issue 66: queue-page (the Postgres queue's jobs page under a 1,000,000-job backlog, beside
 *   deliveries; scripts/attack/queue-page.ts)
 *
 * Exits 1 if a scenario could not run (the figures are for reading, not asserted; the
 * regression tests assert them: test/edge-bounds.alone.test.ts, test/backpressure.alone.test.ts).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sign as githubSign } from '@octokit/webhooks-methods';
import {
  killAllServices,
  parseScriptArgs,
  rawPosts,
  residentMb,
  sampleMax,
  SECRETS,
  signStripe,
  slowBodies,
  spawnService,
  startBlackhole,
  startHealthProber,
  createScratchDatabase,
} from '@oncehook/harness';
import { count, countRows, env, type ScenarioRun, sql, startIngest } from './attack/common.js';
import { ROUND_THREE } from './attack/round-three.js';
import { ISSUE_66 } from './attack/queue-page.js';

const SCENARIOS = [
  ...(Object.keys(ROUND_THREE) as (keyof typeof ROUND_THREE)[]),
  ...(Object.keys(ISSUE_66) as (keyof typeof ISSUE_66)[]),
  'slow-bodies',
  'blackhole',
  'labels',
  'poison',
  'poison-numbers',
  'fake-signature-bodies',
  'delivery-log',
  'deep-nesting',
  'hmac-non-object',
  'pipelined',
  'liveness',
] as const;
type Scenario = (typeof SCENARIOS)[number];

async function slowBodyScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, url, port } = await startIngest(root, databaseUrl);
  const before = residentMb(ingest.pid);
  const rss = sampleMax(() => residentMb(ingest.pid));
  let healthWorst = 0;
  let healthFailures = 0;
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const started = Date.now();
      await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) }).then(
        (r) => {
          if (!r.ok) healthFailures += 1;
        },
        () => {
          healthFailures += 1;
        },
      );
      healthWorst = Math.max(healthWorst, Date.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  const result = await slowBodies(
    { host: '127.0.0.1', port, path: '/webhooks/stripe', connections: 2000, declaredBytes: 1024 * 1024, sentBytes: 128 * 1024, chunkBytes: 16 * 1024, chunkEveryMs: 250 },
    330_000,
  );
  const peak = rss.stop();
  watching = false;
  await watch;
  const closed = result.closedAfterMs.filter((ms): ms is number => ms !== null);
  const warnLines = ingest.lines.filter((l) => /"level":40/.test(l)).length;
  const errorLines = ingest.lines.filter((l) => /"level":50/.test(l)).length;
  await ingest.stop();
  return `slow-bodies: answers ${JSON.stringify(result.statuses)}; closed ${closed.length}/2000, slowest close ${Math.max(...closed)} ms; RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB; /healthz worst ${healthWorst} ms, ${healthFailures} failures; log lines: ${warnLines} warn, ${errorLines} error`;
}

async function blackholeScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const target = new URL(databaseUrl);
  const hole = await startBlackhole({ host: target.hostname, port: Number(target.port || 5432) });
  const via = new URL(databaseUrl);
  via.port = String(hole.port);
  const { ingest, port } = await startIngest(root, via.toString());
  try {
    const big = (id: string) =>
      signStripe({
        id,
        object: 'event',
        type: 'payment_intent.succeeded',
        created: Math.floor(Date.now() / 1000),
        data: { object: { id: `pi_${id}`, metadata: { notes: 'n'.repeat(200_000) } } },
      });
    const warm = await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, [big('evt_warm_1'), big('evt_warm_2')]);
    hole.swallow();
    const deliveries = Array.from({ length: 1000 }, (_, i) => big(`evt_bh_${i}`));
    const before = residentMb(ingest.pid);
    const rss = sampleMax(() => residentMb(ingest.pid));
    const answers = await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, deliveries, { giveUpAfterMs: 60_000 });
    const peak = rss.stop();
    const times = answers.map((a) => a.ms).sort((a, b) => a - b);
    return `blackhole: warm-up ${JSON.stringify(count(warm))}; 1000 x 200 KB answers ${JSON.stringify(count(answers))} (0 = no answer within 60 s); answer ms p50 ${times[499]}, p99 ${times[989]}, max ${times[999]}; RSS ${before.toFixed(0)} -> peak ${peak.toFixed(0)} MiB`;
  } finally {
    await ingest.kill9();
    await hole.close();
  }
}

async function labelScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, url, port } = await startIngest(root, databaseUrl);
  const metricsBefore = await (await fetch(`${url}/metrics`)).text();
  const rowsBefore = await countRows(databaseUrl);
  const body = JSON.stringify({ action: 'opened', issue: { number: 7 }, repository: { full_name: 'acme/app' } });
  const signature = await githubSign(SECRETS.github, body);
  const deliveries = Array.from({ length: 2000 }, (_, i) => ({
    body,
    headers: {
      'content-type': 'application/json',
      'x-hub-signature-256': signature,
      'x-github-delivery': `forged-${i}`,
      'x-github-hook-id': '1',
      'x-github-event': `made_up_${i}`,
    },
  }));
  const answers: { status: number }[] = [];
  for (let i = 0; i < deliveries.length; i += 200) answers.push(...(await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/github' }, deliveries.slice(i, i + 200))));
  const metricsAfter = await (await fetch(`${url}/metrics`)).text();
  const series = (text: string) => text.split('\n').filter((l) => l.startsWith('webhook_events_total{')).length;
  const rowsAfter = await countRows(databaseUrl);
  await ingest.stop();
  return `labels: answers ${JSON.stringify(count(answers))}; rows created ${rowsAfter - rowsBefore}; webhook_events_total series ${series(metricsBefore)} -> ${series(metricsAfter)}; /metrics ${(metricsBefore.length / 1024).toFixed(1)} -> ${(metricsAfter.length / 1024).toFixed(1)} KiB`;
}

async function poisonScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, port } = await startIngest(root, databaseUrl);
  const now = Math.floor(Date.now() / 1000);
  const deliveries = Array.from({ length: 54 }, (_, i) =>
    i === 26
      ? signStripe(`{"id":"evt_poison","object":"event","type":"t","created":1e15,"data":{"object":{}}}`)
      : signStripe({ id: `evt_p_${randomBytes(4).toString('hex')}_${i}`, object: 'event', type: 't', created: now, data: { object: {} } }),
  );
  const answers = await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, deliveries);
  await ingest.stop();
  const others = answers.filter((_, i) => i !== 26);
  return `poison: the poison got ${answers[26]?.status}; the other 53: ${JSON.stringify(count(others))}`;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
const stripeEvent = (id: string, object: string) => `{"id":"${id}","object":"event","type":"payment_intent.succeeded","created":${nowSeconds()},"data":{"object":${object}}}`;
const post = async (url: string, source: string, delivery: { body: string; headers: Record<string, string> }) =>
  (await fetch(`${url}/webhooks/${source}`, { method: 'POST', body: delivery.body, headers: delivery.headers })).status;

/** Inserts an event as a version without the payload limits stored it (no payload_bytes). */
async function storeAsBefore(url: string, eventId: string, payload: string): Promise<number> {
  const rows = await sql<{ id: number }>(
    url,
    `INSERT INTO oncehook.events (provider, kind, event_id, type, payload, meta) VALUES ('stripe', 'stripe', $1, 'payment_intent.succeeded', $2::jsonb, '{}') RETURNING id`,
    [eventId, payload],
  );
  return rows[0]!.id;
}

async function poisonNumbersScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, url } = await startIngest(root, databaseUrl);
  const payload = stripeEvent('evt_numbers', `{"v":[${Array(4200).fill('1e131071').join(',')}]}`);
  const answer = await post(url, 'stripe', signStripe(payload));
  await ingest.stop();
  const stored = (await sql<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM oncehook.events WHERE event_id = 'evt_numbers'`))[0]?.n ?? 0;
  // The payload as a version without the limits stored it, and a worker that leases it.
  await storeAsBefore(databaseUrl, 'evt_numbers_old', payload);
  const worker = spawnService(
    'worker',
    {
      ...env(databaseUrl),
      ONCEHOOK_HANDLERS: 'examples/shop',
      SHOP_PAYMENT_API_URL: 'http://127.0.0.1:9/payment',
      SHOP_EMAIL_API_URL: 'http://127.0.0.1:9/email',
      SHOP_FULFILMENT_API_URL: 'http://127.0.0.1:9/fulfilment',
      REQUEUE_AFTER_MS: '500',
      RECONCILE_INTERVAL_MS: '200',
      METRICS_PORT: '0',
    },
    [],
    { root },
  );
  const rss = sampleMax(() => residentMb(worker.pid));
  const deadline = Date.now() + 20_000;
  let run: { state: string; attempts: number; last_error: string | null } | undefined;
  while (Date.now() < deadline && worker.proc.exitCode === null && worker.proc.signalCode === null) {
    run = (
      await sql<{ state: string; attempts: number; last_error: string | null }>(
        databaseUrl,
        `SELECT r.state, r.attempts, r.last_error FROM oncehook.handler_runs r JOIN oncehook.events e ON e.id = r.event_row_id WHERE e.event_id = 'evt_numbers_old'`,
      )
    )[0];
    if (run?.state === 'failed' || run?.state === 'done') break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const peak = rss.stop();
  const alive = worker.proc.exitCode === null && worker.proc.signalCode === null;
  const crash = worker.lines.find((l) => /ERR_STRING_TOO_LONG|Invalid string length|heap out of memory/.test(l));
  if (alive) await worker.stop();
  return `poison-numbers: the signed delivery got ${answer}, ${stored} row stored; the same payload stored as before the limits: worker ${alive ? 'alive' : `DIED (exit ${worker.proc.exitCode ?? worker.proc.signalCode})${crash ? `: ${crash.slice(0, 100)}` : ''}`}, worker RSS peak ${peak.toFixed(0)} MiB, run ${run ? `${run.state} after ${run.attempts} attempt(s)${run.last_error ? ` (${run.last_error.slice(0, 70)}...)` : ''}` : 'never created'}`;
}

async function fakeSignatureScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, port } = await startIngest(root, databaseUrl);
  const attack = slowBodies(
    {
      host: '127.0.0.1',
      port,
      path: '/webhooks/stripe',
      connections: 17,
      declaredBytes: 1024 * 1024,
      sentBytes: 512 * 1024,
      chunkBytes: 16 * 1024,
      chunkEveryMs: 500,
      headers: { 'Stripe-Signature': `t=${nowSeconds()},v1=${'0'.repeat(64)}` },
    },
    40_000,
  );
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const real = Array.from({ length: 98 }, (_, i) => signStripe({ id: `evt_real_${i}`, object: 'event', type: 't', created: nowSeconds(), data: { object: {} } }));
  const answers = await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, real);
  const slow = await attack;
  await ingest.stop();
  const times = answers.map((a) => a.ms).sort((a, b) => a - b);
  return `fake-signature-bodies: 98 real deliveries during the attack ${JSON.stringify(count(answers))} (slowest answer ${times[times.length - 1]} ms); the 17 slow ones ${JSON.stringify(slow.statuses)}`;
}

async function deliveryLogScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, port } = await startIngest(root, databaseUrl);
  const delivery = signStripe({ id: 'evt_storm', object: 'event', type: 't', created: nowSeconds(), data: { object: {} } });
  const answers: { status: number }[] = [];
  const started = Date.now();
  for (let i = 0; i < 5000; i += 100) answers.push(...(await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, Array(100).fill(delivery))));
  const seconds = (Date.now() - started) / 1000;
  await ingest.stop();
  const rows = (
    await sql<{ n: number; bytes: string }>(
      databaseUrl,
      `SELECT count(*)::int AS n, pg_size_pretty(pg_total_relation_size('oncehook.deliveries')) AS bytes FROM oncehook.deliveries`,
    )
  )[0];
  return `delivery-log: one event delivered 5000 times in ${seconds.toFixed(1)} s, answers ${JSON.stringify(count(answers))}; delivery log rows ${rows?.n}, table ${rows?.bytes}`;
}

async function deepNestingScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const token = 'attack-admin-token-0123456789abcdef';
  const { ingest, url } = await startIngest(root, databaseUrl, { ADMIN_TOKEN: token });
  const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
  const answer = await post(url, 'stripe', signStripe(stripeEvent('evt_deep', deep(5000))));
  const rssBefore = residentMb(ingest.pid);
  const rowId = await storeAsBefore(databaseUrl, 'evt_deep_old', `{"id":"evt_deep_old","data":[${Array(10).fill(deep(2000)).join(',')}]}`);
  const page = await fetch(`${url}/admin/events/${rowId}`, { headers: { authorization: `Bearer ${token}` } }).then(
    async (r) => ({ status: r.status, bytes: (await r.text()).length }),
    () => ({ status: 0, bytes: 0 }),
  );
  const api = await fetch(`${url}/admin/api/events/${rowId}`, { headers: { authorization: `Bearer ${token}` } }).then(
    (r) => r.status,
    () => 0,
  );
  const alive = ingest.proc.exitCode === null && ingest.proc.signalCode === null;
  const rssAfter = alive ? residentMb(ingest.pid) : 0;
  if (alive) await ingest.stop();
  return `deep-nesting: the signed 5000-deep array got ${answer}; stored as before the limits (10 x 2000 deep): admin page ${page.status} (${(page.bytes / 1024).toFixed(0)} KiB), API ${api}; ingest ${alive ? `alive, RSS ${rssBefore.toFixed(0)} -> ${rssAfter.toFixed(0)} MiB` : 'DIED'}`;
}

async function hmacNonObjectScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const secret = 'in-house-signing-secret';
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-attack-'));
  const file = path.join(dir, 'sources.json');
  await writeFile(
    file,
    JSON.stringify({
      sources: [
        {
          name: 'inhouse',
          kind: 'hmac',
          secrets: [secret],
          signatureHeader: 'X-Sig',
          encoding: 'hex',
          timestampHeader: 'X-Timestamp',
          signedHeaders: ['X-Event-Id'],
          id: { header: 'X-Event-Id' },
          type: { value: 'ping' },
        },
      ],
    }),
  );
  const { ingest, url } = await startIngest(root, databaseUrl, { ONCEHOOK_SOURCES_FILE: file });
  const answers: string[] = [];
  for (const [i, body] of ['[1,2]', 'null', '42'].entries()) {
    const timestamp = String(nowSeconds());
    const id = `non-object-${i}`;
    const signature = createHmac('sha256', secret).update(`${timestamp}.${id}.`).update(body).digest('hex');
    answers.push(
      `${body} -> ${await post(url, 'inhouse', { body, headers: { 'content-type': 'application/json', 'x-sig': signature, 'x-timestamp': timestamp, 'x-event-id': id } })}`,
    );
  }
  await ingest.stop();
  await rm(dir, { recursive: true, force: true });
  return `hmac-non-object: ${answers.join(', ')}; rows stored ${await countRows(databaseUrl)}`;
}

async function pipelinedScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, port } = await startIngest(root, databaseUrl);
  const signed = signStripe({ id: 'evt_pipelined', object: 'event', type: 't', created: nowSeconds(), data: { object: {} } });
  const request = (target: string, body: string, headers: Record<string, string>) =>
    [`POST ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Content-Length: ${Buffer.byteLength(body)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', body].join(
      '\r\n',
    );
  const received = await new Promise<string>((resolve) => {
    let text = '';
    const socket = connect({ host: '127.0.0.1', port }, () =>
      socket.write(request('/webhooks/nope', '{"x":1}', { 'content-type': 'application/json' }) + request('/webhooks/stripe', signed.body, signed.headers)),
    );
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('close', () => resolve(text));
    socket.on('error', () => resolve(text));
  });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await ingest.stop();
  const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);
  const stored = (await sql<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM oncehook.events WHERE event_id = 'evt_pipelined'`))[0]?.n ?? 0;
  return `pipelined: answers on the connection [${statuses.join(', ')}]; the second (signed) delivery stored: ${stored === 1 ? 'YES (answered: ' + (statuses.length > 1 ? 'yes' : 'NO') + ')' : 'no'}`;
}

async function livenessScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, port } = await startIngest(root, databaseUrl, { HEALTH_PORT: '0', MAX_WAITING_CLAIMS: '5000' });
  const line = await ingest.waitFor(/liveness on \d+/, 3_000).catch(() => null);
  const livePort = line ? Number(/liveness on (\d+)/.exec(line)?.[1]) : null;
  const prober = await startHealthProber(livePort ? [port, livePort] : [port]);
  const deliveries = Array.from({ length: 4000 }, (_, i) => signStripe({ id: `evt_flood_${i}`, object: 'event', type: 't', created: nowSeconds(), data: { object: {} } }));
  const started = Date.now();
  const answers = await rawPosts({ host: '127.0.0.1', port, path: '/webhooks/stripe' }, deliveries);
  const seconds = (Date.now() - started) / 1000;
  const probes = await prober.stop();
  await ingest.stop();
  const describe = (p: number) => {
    const mine = probes.filter((x) => x.port === p);
    return `${mine.length} probes, slowest ${Math.max(0, ...mine.map((x) => x.ms))} ms, ${mine.filter((x) => x.status !== 200).length} not 200`;
  };
  return `liveness: 4000 deliveries in ${seconds.toFixed(1)} s (${(4000 / seconds).toFixed(0)}/s, ${JSON.stringify(count(answers))}); /healthz on the main port: ${describe(port)}; ${livePort ? `liveness port: ${describe(livePort)}, main loop last ran up to ${Math.max(0, ...probes.filter((x) => x.port === livePort).map((x) => x.lag ?? 0))} ms before a probe` : 'no liveness port (HEALTH_PORT unknown to this checkout)'}`;
}

async function main(): Promise<void> {
  const { values } = parseScriptArgs(import.meta.url, { options: { scenario: { type: 'string', default: 'all' }, root: { type: 'string' } } });
  const chosen = values.scenario === 'all' ? [...SCENARIOS] : (values.scenario.split(',').map((name) => name.trim()) as Scenario[]);
  for (const scenario of chosen) {
    if (!SCENARIOS.includes(scenario)) {
      process.stderr.write(`unknown scenario "${scenario}"; one of all, ${SCENARIOS.join(', ')}\n`);
      process.exit(2);
    }
  }
  const root = values.root;
  process.stdout.write(`attacking the ingest of ${root ?? 'this checkout'}\n`);
  let failed = false;
  for (const scenario of chosen) {
    const database = await createScratchDatabase({ prefix: 'oncehook_attack' });
    const databaseUrl = database.url;
    try {
      const migrate = spawnService('migrate', { DATABASE_URL: databaseUrl }, [], { root });
      const { code } = await migrate.exited;
      if (code !== 0) throw new Error(`migrate exited ${code}:\n${migrate.lines.slice(-10).join('\n')}`);
      const run: ScenarioRun = {
        ...ROUND_THREE,
        ...ISSUE_66,
        'slow-bodies': slowBodyScenario,
        blackhole: blackholeScenario,
        labels: labelScenario,
        poison: poisonScenario,
        'poison-numbers': poisonNumbersScenario,
        'fake-signature-bodies': fakeSignatureScenario,
        'delivery-log': deliveryLogScenario,
        'deep-nesting': deepNestingScenario,
        'hmac-non-object': hmacNonObjectScenario,
        pipelined: pipelinedScenario,
        liveness: livenessScenario,
      }[scenario];
      process.stdout.write(`${await run(root, databaseUrl)}\n`);
    } catch (error) {
      failed = true;
      process.stderr.write(`${scenario} could not run: ${(error as Error).stack ?? String(error)}\n`);
    } finally {
      await killAllServices();
      await database.drop();
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
