/**
 * `npm run attack -- [--scenario all|slow-bodies|blackhole|labels|poison] [--root DIR]`
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
 * Exits 1 if a scenario could not run (the figures are for reading, not asserted; the
 * regression tests assert them: test/edge-bounds.alone.test.ts, test/backpressure.alone.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sign as githubSign } from '@octokit/webhooks-methods';
import {
  killAllServices,
  rawPosts,
  REDIS_URL,
  rssMiB,
  sampleMax,
  SECRETS,
  signStripe,
  slowBodies,
  spawnService,
  startBlackhole,
  STRIPE_SECRET,
  urlFor,
  withAdmin,
  type Service,
} from '@oncehook/harness';
import pg from 'pg';

const SCENARIOS = ['slow-bodies', 'blackhole', 'labels', 'poison'] as const;
type Scenario = (typeof SCENARIOS)[number];

const adminQuery = (sql: string) => withAdmin((client) => client.query(sql));

async function countRows(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM oncehook.events');
    return rows[0]?.n ?? -1;
  } finally {
    await client.end();
  }
}

function env(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    REDIS_URL,
    QUEUE_PREFIX: `attack-${randomBytes(4).toString('hex')}`,
    STRIPE_WEBHOOK_SECRET: STRIPE_SECRET,
    GITHUB_WEBHOOK_SECRET: SECRETS.github,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
}

async function startIngest(root: string | undefined, databaseUrl: string): Promise<{ ingest: Service; url: string; port: number }> {
  const ingest = spawnService('ingest', env(databaseUrl), [], { root });
  const line = await ingest.waitFor(/ingest listening on \d+/);
  const port = Number(/listening on (\d+)/.exec(line)?.[1]);
  return { ingest, url: `http://127.0.0.1:${port}`, port };
}

function count<T extends { status: number }>(answers: T[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const a of answers) out[a.status] = (out[a.status] ?? 0) + 1;
  return out;
}

async function slowBodyScenario(root: string | undefined, databaseUrl: string): Promise<string> {
  const { ingest, url, port } = await startIngest(root, databaseUrl);
  const before = rssMiB(ingest.pid);
  const rss = sampleMax(() => rssMiB(ingest.pid));
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
    const before = rssMiB(ingest.pid);
    const rss = sampleMax(() => rssMiB(ingest.pid));
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

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { scenario: { type: 'string', default: 'all' }, root: { type: 'string' } } });
  const chosen = values.scenario === 'all' ? [...SCENARIOS] : [values.scenario as Scenario];
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
    const name = `oncehook_attack_${randomBytes(4).toString('hex')}`;
    await adminQuery(`CREATE DATABASE ${name}`);
    const databaseUrl = urlFor(name);
    try {
      const migrate = spawnService('migrate', { DATABASE_URL: databaseUrl }, [], { root });
      const { code } = await migrate.exited;
      if (code !== 0) throw new Error(`migrate exited ${code}:\n${migrate.lines.slice(-10).join('\n')}`);
      const run = { 'slow-bodies': slowBodyScenario, blackhole: blackholeScenario, labels: labelScenario, poison: poisonScenario }[scenario];
      process.stdout.write(`${await run(root, databaseUrl)}\n`);
    } catch (error) {
      failed = true;
      process.stderr.write(`${scenario} could not run: ${(error as Error).stack ?? String(error)}\n`);
    } finally {
      await killAllServices();
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
