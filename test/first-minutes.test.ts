/**
 * A new user's first minutes, as the README tells them (issue 11), the commands read from the
 * README's own text (issue 25) and run the way npm runs them: `npm start` on an empty
 * database, `npm run send` of Stripe's own `payment_intent.succeeded` fixture, the event done
 * with its effect; and `npm start` refusing, in one line naming the cause and the variable, when
 * Postgres or Redis cannot be reached or a port is taken. Every process runs with a clean
 * environment: nothing from the shell running the tests leaks in.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createServer, type Server } from 'node:net';
import { freePort, REDIS_URL, ROOT, urlFor, waitFor, withAdmin, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { PROVIDER_KINDS } from '@oncehook/providers';
import { createTestDatabase } from './helpers/db.js';
import { afterAll, expect, it } from 'vitest';
import { docBlockStarting, docCommand, npmCommand } from './helpers/docs.js';
import { runCliHere } from './helpers/cli-here.js';

const CLEAN = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' };
const databases: string[] = [];
const running: ChildProcess[] = [];

afterAll(async () => {
  for (const child of running) if (child.exitCode === null) child.kill('SIGKILL');
  for (const name of databases) await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
});

type Running = { child: ChildProcess; output: () => string; stderr: () => string; exited: Promise<number | null> };

function run(script: string, args: string[], env: Record<string, string>): Running {
  return runNode([...SOURCE_NODE_ARGS, script, ...args], env);
}

/** A line of the README (`VAR=x npm start`, `npm run send -- ...`), run as npm would run it, with `env` beneath the line's own variables. */
/** `detached`: a process group of its own, as a shell's foreground job (Ctrl-C reaches all of it). */
async function runDocumented(line: string, env: Record<string, string>, options: { detached?: boolean } = {}): Promise<Running> {
  const command = await npmCommand(line);
  return runNode(command.nodeArgs, { ...env, ...command.env }, options);
}

function runNode(args: string[], env: Record<string, string>, options: { detached?: boolean } = {}): Running {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...CLEAN, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached === true });
  running.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => out, stderr: () => err, exited };
}

async function ports(): Promise<{ PORT: string; SANDBOX_PORT: string; METRICS_PORT: string }> {
  return { PORT: String(await freePort()), SANDBOX_PORT: String(await freePort()), METRICS_PORT: String(await freePort()) };
}

/**
 * `npm start`, `npm run send`, the event done with its effect. `postgres`: the README's "No Redis
 * at hand" line, `QUEUE_BACKEND=postgres npm start` with REDIS_URL at a port where nothing
 * listens.
 */
async function firstMinutes(queueBackend: 'redis' | 'postgres'): Promise<void> {
  const started = Date.now();
  const name = `oncehook_first_${queueBackend === 'redis' ? '' : 'pgq_'}${process.pid}_${Date.now() % 100_000}`;
  databases.push(name);
  const redisUrl = queueBackend === 'redis' ? REDIS_URL : `redis://127.0.0.1:${await freePort()}`;
  const env = { DATABASE_URL: urlFor(name), REDIS_URL: redisUrl, QUEUE_PREFIX: `first-${name}`, WORKERS: '1', ...(await ports()) };
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  // The quick start's `npm start`, or the "No Redis at hand" line's `QUEUE_BACKEND=postgres npm start`.
  const startLine = queueBackend === 'redis' ? await docCommand('README.md', /^npm start$/) : /`(QUEUE_BACKEND=postgres npm start)`/.exec(readme)?.[1];
  expect(startLine, 'the README names the command').toBeDefined();
  const stack = await runDocumented(startLine!, env, { detached: true });
  await waitFor(() => stack.output().includes('oncehook is up') || stack.child.exitCode !== null || null, { timeoutMs: 45_000, what: 'the banner' });
  expect(stack.output(), stack.stderr()).toContain('oncehook is up');
  // The banner's hint: a command that runs here, for a type the example's handlers take.
  const suggested = /send a signed test event:\s+(npm run oncehook -- send stripe \S+)/.exec(stack.output())?.[1];
  expect(suggested, stack.output()).toBeDefined();
  expect(stack.output().includes('the queue in Postgres')).toBe(queueBackend === 'postgres');

  // The README's send line as written (it reaches ingest at PORT), and the answer the README shows.
  const send = await runDocumented(await docCommand('README.md', 'npm run send -- stripe payment_intent.succeeded'), env);
  expect(await send.exited, send.output() + send.stderr()).toBe(0);
  const shown = /^\s+(#1 -> 202 accepted)$/m.exec(readme)?.[1];
  expect(shown, 'the README shows the answer').toBeDefined();
  expect(send.output()).toContain(shown);
  const eventId = /(evt_\w+)/.exec(send.output())?.[1];
  // Its own hint (`see it: ...`) runs here too, and so does the banner's.
  const seeIt = /^see it: (npm run oncehook -- show \S+)$/m.exec(send.output())?.[1];
  expect(seeIt, send.output()).toBeDefined();
  const shownEvent = await runDocumented(seeIt!, env);
  expect(await shownEvent.exited, shownEvent.output() + shownEvent.stderr()).toBe(0);
  expect(shownEvent.output()).toContain(eventId!);

  const pool = createPool(env.DATABASE_URL, { max: 1 });
  try {
    const state = await waitFor(
      async () => {
        const { rows } = await pool.query<{ state: string }>('SELECT state FROM oncehook.events WHERE event_id = $1', [eventId]);
        return rows[0]?.state === 'done' || rows[0]?.state === 'failed' ? rows[0].state : null;
      },
      { timeoutMs: 20_000, what: 'the event finished' },
    );
    expect(state).toBe('done');
    // Stripe's CLI fixture has no customer: the example credits the guest account.
    const { rows } = await pool.query<{ balance: number }>(`SELECT balance_cents::int AS balance FROM ledger_accounts WHERE id = 'guest'`);
    expect(rows).toEqual([{ balance: 2000 }]);
  } finally {
    await pool.end();
  }
  const seconds = (Date.now() - started) / 1000;
  console.log(`[figure] empty database -> npm start ready -> npm run send -> done in ${seconds.toFixed(1)} s (queue on ${queueBackend})`);
  expect(seconds).toBeLessThan(60);
  // The banner's suggestion is accepted too (after the balance check: it may credit again).
  const sentSuggested = await runDocumented(suggested!, env);
  expect(await sentSuggested.exited, sentSuggested.output() + sentSuggested.stderr()).toBe(0);
  if (queueBackend === 'redis') {
    await everySenderDone(env);
    await backfillFromTheSandbox(env);
  }

  // Ctrl-C (SIGINT to the whole foreground group: npm start, the sandbox, ingest, the workers)
  // on one backend; on the other, SIGTERM to the command alone (a process manager's stop): it
  // stops its own processes. Either way: in order, exit 0, without a warning or a stack trace,
  // and no process of the group left.
  const before = { out: stack.output().length, err: stack.stderr().length };
  if (queueBackend === 'redis') process.kill(-stack.child.pid!, 'SIGINT');
  else stack.child.kill('SIGTERM');
  expect(await stack.exited).toBe(0);
  const stopping = `${stack.output().slice(before.out)}\n${stack.stderr().slice(before.err)}`.split('\n');
  expect(stopping.filter((line) => /\b(WARN|ERROR|FATAL)\b|Unhandled|uncaught|^\s+at /i.test(line))).toEqual([]);
  const groupAlive = () => {
    try {
      process.kill(-stack.child.pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
  await waitFor(() => !groupAlive() || null, { timeoutMs: 10_000, what: 'every process of the stack gone' });
}

/**
 * docs/operating.md's "Try it without a Stripe account", as written, against `npm start`'s
 * sandbox (at this test's SANDBOX_PORT instead of 4010): the curl stores an undelivered event,
 * the backfill claims it (`new 1`), and a second run finds it known.
 */
async function backfillFromTheSandbox(env: Record<string, string>): Promise<void> {
  const block = await docBlockStarting('docs/operating.md', 'sh', 'curl -s -X POST http://127.0.0.1:4010/stripe/_events');
  const [curl, backfill] = block
    .trim()
    .split('\n')
    .map((line) => line.replaceAll('127.0.0.1:4010', `127.0.0.1:${env.SANDBOX_PORT}`));
  const stored = await runShell(curl!, env);
  expect(stored.output, stored.stderr).toMatch(/"stored":1/);
  const assignments = Object.fromEntries([...backfill!.matchAll(/\b([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
  const command = backfill!.replace(/^(\s*[A-Z_]+=\S+\s+)+/, '');
  for (const expected of ['new 1', 'already known 1']) {
    const run = await runDocumented(command, { ...env, ...assignments });
    expect(await run.exited, run.output() + run.stderr()).toBe(0);
    expect(run.output()).toContain(expected);
  }
}

/** A shell line of the docs (curl), run by bash. */
async function runShell(line: string, env: Record<string, string>): Promise<{ output: string; stderr: string }> {
  const child = spawn('bash', ['-c', line], { cwd: ROOT, env: { ...CLEAN, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  await new Promise((resolve) => child.on('close', resolve));
  return { output, stderr };
}

/**
 * `npm run send -- --list` names every built-in sender, and `npm run send -- --all --copies 2`
 * sends each one's built-in payload twice: accepted, then a duplicate (signed afresh with the
 * development secret the stack verifies with), and every event ends `done`. One process for
 * every sender (31 `npm run send` processes took ~60 s of CPU here).
 */
async function everySenderDone(env: Record<string, string>): Promise<void> {
  const list = await runDocumented('npm run send -- --list', env);
  expect(await list.exited, list.stderr()).toBe(0);
  const listed = [...list.output().matchAll(/^(\S+) \(/gm)].map((m) => m[1]!);
  expect(listed).toEqual(expect.arrayContaining([...PROVIDER_KINDS.filter((kind) => kind !== 'hmac')]));
  const sent = await runDocumented('npm run send -- --all --copies 2', env);
  expect(await sent.exited, sent.output() + sent.stderr()).toBe(0);
  // Each source's block: its sending line and the two answers.
  const blocks = new Map(
    [...sent.output().matchAll(/^sending 2 deliveries of (\S+) \S+ (\S+) to http[^\n]*\n((?: {2}#\d[^\n]*\n)+)/gm)].map((m) => [m[1]!, { eventId: m[2]!, answers: m[3]! }]),
  );
  expect([...blocks.keys()].sort()).toEqual(listed.filter((source) => source !== 'hmac').sort());
  const pool = createPool(env.DATABASE_URL!, { max: 2 });
  try {
    for (const [source, { eventId, answers }] of blocks) {
      expect(answers, source).toMatch(/#1 -> 202 accepted[\s\S]*#2 -> 200 duplicate/);
      const state = await waitFor(
        async () => {
          const { rows } = await pool.query<{ state: string }>('SELECT state FROM oncehook.events WHERE provider = $1 AND event_id = $2', [source, eventId]);
          return rows[0]?.state === 'done' || rows[0]?.state === 'failed' ? rows[0].state : null;
        },
        { timeoutMs: 30_000, what: `the ${source} event finished` },
      );
      expect(state, source).toBe('done');
    }
  } finally {
    await pool.end();
  }
}

it('npm start on an empty database, npm run send of the Stripe CLI fixture: done, the guest credited, in under a minute; then every built-in sender', async () => {
  await firstMinutes('redis');
}, 180_000);

it('the same without Redis: QUEUE_BACKEND=postgres npm start', async () => {
  await firstMinutes('postgres');
});

it('npm start refuses in one line on stderr, naming the cause and the variable: Postgres down, Redis down, a port taken', async () => {
  const base = { REDIS_URL, QUEUE_PREFIX: 'first-refusals', WORKERS: '1' };
  const cases: { env: Record<string, string>; message: RegExp }[] = [
    {
      env: { ...base, DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/x`, ...(await ports()) },
      message: /^oncehook dev: cannot reach Postgres at 127\.0\.0\.1:\d+\/\w+ \(DATABASE_URL, from the environment\): ECONNREFUSED\. Start it/,
    },
    {
      env: { ...base, DATABASE_URL: urlFor('postgres'), REDIS_URL: `redis://127.0.0.1:${await freePort()}`, ...(await ports()) },
      message: /^oncehook dev: cannot reach Redis at 127\.0\.0\.1:\d+ \(REDIS_URL\): ECONNREFUSED\. Start it, unset REDIS_URL, or run without Redis: QUEUE_BACKEND=postgres$/,
    },
  ];
  // A port taken by someone else.
  const taken: Server = createServer();
  const takenPort = await new Promise<number>((resolve) => taken.listen(0, '127.0.0.1', () => resolve((taken.address() as { port: number }).port)));
  cases.push({
    env: { ...base, DATABASE_URL: urlFor('postgres'), ...(await ports()), PORT: String(takenPort) },
    message: new RegExp(`^oncehook dev: port ${takenPort} is already in use \\(PORT\\)`),
  });
  try {
    for (const { env, message } of cases) {
      const start = run('scripts/start.ts', [], env);
      expect(await start.exited).toBe(1);
      const lines = start.stderr().trim().split('\n');
      expect(lines, start.stderr()).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    }
  } finally {
    taken.close();
  }
});

it('ingest alone on a taken port says so in one line and exits 1', async () => {
  // A database with Oncehook's tables (one without them stops ingest before it listens).
  const db = await createTestDatabase();
  const taken: Server = createServer();
  const port = await new Promise<number>((resolve) => taken.listen(0, '127.0.0.1', () => resolve((taken.address() as { port: number }).port)));
  try {
    const ingest = run('apps/ingest/src/server.ts', [], {
      STRIPE_WEBHOOK_SECRET: 'whsec_local_development_secret',
      DATABASE_URL: db.url,
      REDIS_URL,
      PORT: String(port),
      HOST: '127.0.0.1',
    });
    expect(await ingest.exited).toBe(1);
    expect(ingest.stderr().trim()).toBe(`port ${port} is already in use (PORT): stop what uses it, or set PORT to a free port`);
  } finally {
    taken.close();
    await db.drop();
  }
});

it('oncehook send (npm run send) explains its mistakes: an unknown source, a type without a built-in payload, --all with a source; --all names what failed', async () => {
  // In this process (runCliHere: a process per command costs ~2 s of CPU; test/cli.test.ts
  // proves the exit codes of the real entry point), with none of the stack's variables set.
  const clean = { DATABASE_URL: '', REDIS_URL: '', PORT: '', ONCEHOOK_DEV_URL: '' };
  const unknown = await runCliHere(['send', 'strpe'], clean);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/no source named "strpe" is configured; configured: stripe, github, shopify, standard-webhooks, slack, paddle/);
  const noFixture = await runCliHere(['send', 'stripe', 'payout.paid'], clean);
  expect(noFixture.code).toBe(2);
  expect(noFixture.stderr).toMatch(
    /no built-in stripe payload for "payout.paid"; built in: payment_intent.succeeded, customer.updated, charge.refunded, invoice.paid \(or pass your own JSON with --file\)/,
  );
  const down = await runCliHere(['send', 'stripe', '--url', `http://127.0.0.1:${await freePort()}`], clean);
  expect(down.code).toBe(1);
  expect(down.output).toMatch(/no answer \(ECONNREFUSED\): is ingest running at/);
  const allWithSource = await runCliHere(['send', '--all', 'stripe'], clean);
  expect(allWithSource.code).toBe(2);
  expect(allWithSource.stderr).toMatch(/--all sends every source its first built-in payload: give no source, type, --file or --id with it/);
  // Every source tried, each answer printed, the failure named, exit 1.
  const allDown = await runCliHere(['send', '--all', '--url', `http://127.0.0.1:${await freePort()}`], clean);
  expect(allDown.code).toBe(1);
  expect(allDown.output).toMatch(/^sent \d+ sources; not every delivery of stripe, github, shopify, standard-webhooks, slack, paddle, linear, .*, twilio was answered 2xx$/m);
});
