/**
 * Oncehook used from a team's own project, the way they install it (issues 22 and 64): the
 * release is made (`npm run release`, into `<folder>/oncehook/release`, as a checkout beside the
 * project would hold it); a project is made in an empty folder OUTSIDE this repository from
 * docs/use-in-your-project.md's own steps, word for word (its shell lines run as written, with
 * the `@oncehook` scope's registry pointed at a dead address: nothing of ours comes from a
 * registry; its files from the doc's code blocks, which must be examples/starter's files, the
 * template a team copies), and then, with the project's own scripts:
 *
 * - one copy of @oncehook/sdk (npm ls), no registry URL for @oncehook/* in the lockfile; the
 *   published form of the install lines is the release's with the packages' names;
 * - `npm run dev` (a stand-in for the handler's API on 4020), `npm run send -- stripe
 *   charge.refunded`: the starter's first event ends `done`, the handler unchanged;
 * - `oncehook` and `@oncehook/sdk` alone (no test kit) give a working command;
 * - `npm install -D typescript` gives TypeScript 7: the project type-checks with it and with 5.9;
 * - its handler's setting and its Stripe secret live only in `.env.local`: the worker and ingest
 *   read them from there;
 *
 * - the packages pass the ecosystem's package linters (publint; arethetypeswrong, ESM only);
 * - `npm run typecheck`: its handler type-checks with `strict` and `NodeNext`, without
 *   skipLibCheck, with the `stripe` types installed and no `@octokit/webhooks` (Stripe only);
 * - `npm run build` compiles it to dist/; `npm run migrate` applies its own migration;
 *   `oncehook ingest` and `oncehook worker --handlers ./dist/webhooks` (its start:worker
 *   script) run its compiled handler, everything plain JavaScript under node;
 * - five concurrent signed deliveries of one refund: one row in its table, one call to its API;
 * - its API answering 422: a dead letter at attempt 1, although the handler module resolves its
 *   OWN copy of @oncehook/sdk (a second copy beside the worker's: the error is recognised by
 *   its brand, not its class);
 * - `npm test`: its own vitest test, with the testkit's checkHandler, passes.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createScratchDatabase, PG_BASE_URL, REDIS_URL, ROOT, SOURCE_NODE_ARGS, waitFor } from '@oncehook/harness';
import { docBlock, docBlockStarting } from './helpers/docs.js';
import { createPool } from '@oncehook/shared';
import Stripe from 'stripe';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const PACKAGES = ['sdk', 'shared', 'providers', 'core', 'oncehook', 'testkit'];
/** What the release holds, by package (the others: packed for the linters). */
const SECRET = 'whsec_user_project_secret_for_the_test';
const stripe = new Stripe('sk_test_unused');

let dir: string;
const tarballs: Record<string, string> = {};
let dropDatabase: (() => Promise<void>) | undefined;
const children: ChildProcess[] = [];

/** The project's fake notification API: records each call by idempotency key; 422 for charge ch_bad. */
const calls: { key: string | null; charge: string }[] = [];
let api: Server;
let apiUrl: string;

beforeAll(async () => {
  api = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { charge } = JSON.parse(body || '{}') as { charge: string };
      calls.push({ key: (req.headers['idempotency-key'] as string | undefined) ?? null, charge });
      if (charge === 'ch_bad') return res.writeHead(422, { 'content-type': 'application/json' }).end('{"error":"charge unknown to us"}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `ntf_${charge}` }));
    });
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as { port: number }).port}`;
  dir = await mkdtemp(path.join(tmpdir(), 'oncehook-user-project-'));
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  api?.close();
  await dropDatabase?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function spawnIn(cwd: string, args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  return { child, output: () => out };
}

it('a project of its own: installs the packed packages, type-checks, migrates, runs its handler exactly once, dead-letters a 422 at once, and its own testkit test passes', {
  timeout: 600_000,
}, async () => {
  // How long each part took, printed at the end (where to cut when the suite is slow).
  let mark = Date.now();
  const took: string[] = [];
  const lap = (part: string) => {
    took.push(`${part} ${((Date.now() - mark) / 1000).toFixed(1)} s`);
    mark = Date.now();
  };
  // 1. The release, as `npm run release` in a checkout beside the project makes it (npm test has
  // just type-checked the repository: the build only emits).
  const release = path.join(dir, 'oncehook/release');
  const made = await run(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/release.ts', '--no-check', '--out', release], { cwd: ROOT, maxBuffer: 20 * 1024 * 1024 });
  expect(made.stdout).toContain('build: done');
  const version = (JSON.parse(await readFile(path.join(ROOT, 'packages/oncehook/package.json'), 'utf8')) as { version: string }).version;
  expect((await readdir(release)).sort()).toEqual([`oncehook-${version}.tgz`, `oncehook-sdk-${version}.tgz`, `oncehook-testkit-${version}.tgz`]);
  for (const name of ['oncehook', 'sdk', 'testkit']) tarballs[name] = path.join(release, name === 'oncehook' ? `oncehook-${version}.tgz` : `oncehook-${name}-${version}.tgz`);
  // The internal packages, packed for the type linter only (the release carries them inside).
  const packs = path.join(dir, 'packs');
  await mkdir(packs, { recursive: true });
  for (const name of ['shared', 'providers', 'core']) {
    const { stdout } = await run('npm', ['pack', '--pack-destination', packs, '--silent'], { cwd: path.join(ROOT, 'packages', name) });
    tarballs[name] = path.join(packs, stdout.trim().split('\n').pop()!);
  }

  lap('release');
  // 2. The ecosystem's package linters, on what would be published (meanwhile, the install).
  const linted = (async () => {
    for (const name of PACKAGES) {
      const lint = await run(process.execPath, [path.join(ROOT, 'node_modules/publint/src/cli.js'), path.join(ROOT, 'packages', name)], { cwd: ROOT });
      expect(lint.stdout, `publint ${name}`).toContain('All good!');
      const types = await run(
        process.execPath,
        [path.join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), tarballs[name]!, '--profile', 'esm-only', '--format', 'json'],
        {
          cwd: ROOT,
          maxBuffer: 20 * 1024 * 1024,
        },
      ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '', failed: true }));
      expect('failed' in types, `attw ${name}: ${types.stdout.slice(0, 2000)}`).toBe(false);
      // What npm itself checks before a publish (no credentials needed for a dry run).
      const publish = await run('npm', ['publish', '--dry-run', '--json'], { cwd: path.join(ROOT, 'packages', name), maxBuffer: 20 * 1024 * 1024 });
      // npm 11 prints { "<name>": { id, files, ... } }.
      const published = Object.values(JSON.parse(publish.stdout) as Record<string, { id: string; files: { path: string }[] }>)[0];
      expect(published?.id, `npm publish --dry-run ${name}`).toMatch(/@\d+\.\d+\.\d+$/);
      expect(
        published?.files.some((f) => f.path.startsWith('dist/') && f.path.endsWith('.d.ts')),
        `${name} publishes its declarations`,
      ).toBe(true);
    }
  })();

  const npm = (script: string[], env: Record<string, string> = {}) =>
    run('npm', script, {
      cwd: path.join(dir, 'acme-billing'),
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
      maxBuffer: 20 * 1024 * 1024,
      timeout: 300_000,
    }).catch((error: { stdout: string; stderr: string }) => ({ stdout: `${error.stdout}${error.stderr}`, stderr: '', failed: true }));

  lap('linters started');
  // 3. The project, made from docs/use-in-your-project.md's own steps, in an empty folder beside
  // the release's checkout: its shell lines run as written, the `@oncehook` scope's registry
  // pointed at a dead address (the user's .npmrc: nothing of ours may come from a registry).
  const doc = 'docs/use-in-your-project.md';
  const releaseBlock = await docBlockStarting(doc, 'sh', 'npm ci && npm run release');
  expect(releaseBlock).toContain(`release/oncehook-${version}.tgz, oncehook-sdk-${version}.tgz, oncehook-testkit-${version}.tgz`);
  const installBlock = await docBlock(doc, 'sh', 'mkdir acme-billing && cd acme-billing && npm init -y && npm pkg set type=module');
  const lines = installBlock.split('\n').filter((line) => line.trim() !== '');
  const project = path.join(dir, 'acme-billing');
  const sh = (line: string, cwd: string, env: Record<string, string> = {}) =>
    run('bash', ['-c', line], {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', npm_config_userconfig: path.join(dir, 'user.npmrc'), ...env },
      maxBuffer: 20 * 1024 * 1024,
      timeout: 300_000,
    }).catch((error: { stdout: string; stderr: string }) => ({ stdout: `${error.stdout}${error.stderr}`, stderr: '', failed: true }));
  // The user's .npmrc: the @oncehook scope's registry dead (what is asserted), and the npm of a
  // developer's machine with a warm cache (no metadata round trip for what the cache holds, no
  // audit or funding request): the install's packages are the same, only the waits differ.
  await writeFile(path.join(dir, 'user.npmrc'), '@oncehook:registry=http://127.0.0.1:9/\nprefer-offline=true\naudit=false\nfund=false\n');
  const [create, installProd, installDev, ...rest] = lines;
  expect(create).toMatch(/^mkdir acme-billing/);
  expect(installProd).toBe(`npm install ../oncehook/release/oncehook-${version}.tgz ../oncehook/release/oncehook-sdk-${version}.tgz zod`);
  expect(installDev).toBe(`npm install -D ../oncehook/release/oncehook-testkit-${version}.tgz typescript vitest @types/node stripe`);
  // Once published, the same lines with the packages' names, word for word.
  const published = await docBlock(doc, 'sh', 'npm install oncehook @oncehook/sdk zod');
  const named = (line: string) =>
    line.replace(`../oncehook/release/oncehook-${version}.tgz`, 'oncehook').replace(/\.\.\/oncehook\/release\/oncehook-(\w+)-[\d.]+\.tgz/g, '@oncehook/$1');
  expect(published.trim().split('\n')).toEqual([named(installProd!), named(installDev!)]);
  const created = await sh(create!, dir);
  expect('failed' in created, created.stdout).toBe(false);
  const prod = await sh(installProd!, project);
  expect('failed' in prod, prod.stdout).toBe(false);
  // What production installs: the command works without the test kit.
  await expect(readdir(path.join(project, 'node_modules/@oncehook/testkit'))).rejects.toThrow();
  const bare = await sh('node node_modules/oncehook/bin/oncehook.js --help && node node_modules/oncehook/bin/oncehook.js send --list', project);
  expect('failed' in bare, bare.stdout).toBe(false);
  expect(bare.stdout).toContain('stripe (stripe): payment_intent.succeeded');
  const dev = await sh(installDev!, project);
  expect('failed' in dev, dev.stdout).toBe(false);
  for (const line of rest) {
    const done = await sh(line.replace(/\s+#.*$/, ''), project);
    expect('failed' in done, `${line}\n${done.stdout}`).toBe(false);
  }
  lap('install');
  await linted;
  lap('linters (the rest of their time)');
  // One SDK: the command's and the test kit's dependency on it is the project's own copy.
  const sdkCopies = await sh('npm ls @oncehook/sdk --all --parseable', project);
  expect(new Set(sdkCopies.stdout.trim().split('\n')).size, sdkCopies.stdout).toBe(1);
  const lockfile = await readFile(path.join(project, 'package-lock.json'), 'utf8');
  const lock = JSON.parse(lockfile) as { packages: Record<string, { resolved?: string }> };
  const ours = Object.entries(lock.packages).filter(([where]) => /node_modules\/(@oncehook\/|oncehook$)/.test(where));
  expect(ours.length).toBeGreaterThan(0);
  for (const [where, entry] of ours) expect(entry.resolved ?? '(bundled or linked)', where).not.toMatch(/^https?:/);
  await expect(readdir(path.join(project, 'node_modules/@octokit'))).rejects.toThrow(); // a Stripe-only project
  // What `npm install -D typescript` gives a new user today.
  const typescript = JSON.parse(await readFile(path.join(project, 'node_modules/typescript/package.json'), 'utf8')) as { version: string };
  expect(typescript.version).toMatch(/^7\./);

  // Its files, from the doc's blocks; the starter (examples/starter) is the same project.
  const files: [string, string, string][] = [
    ['json', '// tsconfig.json', 'tsconfig.json'],
    ['json', '// tsconfig.build.json', 'tsconfig.build.json'],
    ['sh', '# .gitignore', '.gitignore'],
    ['ts', '// src/webhooks/refunds.ts', 'src/webhooks/refunds.ts'],
    ['sql', '-- migrations/0001_refunds.sql', 'migrations/0001_refunds.sql'],
    ['ts', '// test/refunds.test.ts', 'test/refunds.test.ts'],
  ];
  for (const [language, first, file] of files) {
    const text = await docBlock(doc, language, first);
    expect(text, `${doc}'s ${file} is examples/starter's`).toBe(await readFile(path.join(ROOT, 'examples/starter', file), 'utf8'));
    await mkdir(path.dirname(path.join(project, file)), { recursive: true });
    await writeFile(path.join(project, file), text);
  }
  const { scripts: projectScripts } = JSON.parse(await readFile(path.join(project, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const { scripts: starterScripts } = JSON.parse(await readFile(path.join(ROOT, 'examples/starter/package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(projectScripts).toEqual(starterScripts);
  lap('project checks');
  // 4. The first event, as "4. Develop" says: `npm run dev` (NOTIFY_API_URL unset: its stand-in
  // answers the handler on 4020), then `npm run send -- stripe charge.refunded` in another
  // terminal: the event ends done, the handler unchanged. Where it runs is the test's own
  // (DATABASE_URL, PORT, METRICS_PORT, QUEUE_PREFIX: the README's variables), not the doc's.
  const developBlock = await docBlockStarting(doc, 'sh', 'npm run dev');
  expect(developBlock.split('\n')[0]).toMatch(/^npm run dev\s+#/);
  const sendLine = (await docBlockStarting(doc, 'sh', 'npm run send -- stripe charge.refunded')).split('\n')[0]!.replace(/\s+#.*$/, '');
  const devDatabase = await createScratchDatabase({ prefix: 'oncehook_user_dev' });
  const devEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    DATABASE_URL: devDatabase.url,
    REDIS_URL,
    PORT: '0',
    METRICS_PORT: '0',
    QUEUE_PREFIX: `user-dev-${Date.now() % 1_000_000}`,
  };
  const devRun = spawn('npm', ['run', 'dev'], { cwd: project, env: devEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let devOutput = '';
  devRun.stdout?.on('data', (c: Buffer) => (devOutput += c.toString()));
  devRun.stderr?.on('data', (c: Buffer) => (devOutput += c.toString()));
  try {
    await waitFor(() => (devOutput.includes('oncehook is up') ? true : null), { timeoutMs: 90_000, what: `oncehook dev up:\n${devOutput}` });
    expect(devOutput).toContain('stand-in API:              NOTIFY_API_URL=http://127.0.0.1:4020');
    const sent = await sh(sendLine, project, { REDIS_URL });
    expect('failed' in sent, sent.stdout).toBe(false);
    expect(sent.stdout).toMatch(/#1 -> 202 accepted/);
    const show = /see it: (npx oncehook show \S+)/.exec(sent.stdout)?.[1];
    expect(show, sent.stdout).toBeDefined();
    const shown = await waitFor(
      async () => {
        const out = await sh(show!, project);
        return /state done/.test(out.stdout) ? out.stdout : null;
      },
      { timeoutMs: 60_000, what: `the starter's first event done:\n${devOutput.slice(-3000)}` },
    );
    expect(shown).toMatch(/refunds: done/);
    expect(devOutput).toMatch(/stand-in NOTIFY_API_URL: POST \/notifications \(key \S+\) -> 200/);
  } finally {
    if (devRun.pid) process.kill(-devRun.pid, 'SIGINT');
    await new Promise((resolve) => devRun.once('exit', resolve));
    await devDatabase.drop();
  }

  // The settings live in .env.local, as the doc shows (its example URL pointed at this test's API),
  // never in the processes' environment: the worker's handler and ingest read them from the file.
  const envLocal = await docBlock(doc, 'sh', '# .env.local');
  expect(envLocal).toMatch(/^NOTIFY_API_URL=/m);
  await writeFile(path.join(project, '.env.local'), `${envLocal.replace(/^NOTIFY_API_URL=.*$/m, `NOTIFY_API_URL=${apiUrl}`)}STRIPE_WEBHOOK_SECRET=${SECRET}\n`);

  lap('first event');
  // 4. Its scripts: type-check (strict, NodeNext, no skipLibCheck) with TypeScript 7, and with
  // 5.9 too, then compile to dist/.
  const typecheck = await npm(['run', 'typecheck']);
  expect('failed' in typecheck, typecheck.stdout).toBe(false);
  const typecheck5 = await npm(['exec', '--yes', '--package=typescript@5.9', '--', 'tsc', '-p', 'tsconfig.json']);
  expect('failed' in typecheck5, typecheck5.stdout).toBe(false);
  const build = await npm(['run', 'build']);
  expect('failed' in build, build.stdout).toBe(false);
  expect((await readdir(path.join(project, 'dist/webhooks'))).filter((f) => f.endsWith('.js'))).toEqual(['refunds.js']);
  // The compiled handler resolves its OWN copy of the SDK: another physical copy, beside it.
  const ownSdk = path.join(project, 'dist/webhooks/node_modules/@oncehook/sdk');
  await mkdir(ownSdk, { recursive: true });
  await run('tar', ['xzf', tarballs.sdk!, '-C', ownSdk, '--strip-components=1']);
  lap('typecheck and build');

  // 5. The command, compiled, under plain node: migrate, ingest, worker.
  const database = await createScratchDatabase({ prefix: 'oncehook_user' });
  dropDatabase = database.drop;
  const bin = 'node_modules/oncehook/bin/oncehook.js';
  // Not NOTIFY_API_URL nor STRIPE_WEBHOOK_SECRET: those come from the project's .env.local.
  const env = { DATABASE_URL: database.url, REDIS_URL, QUEUE_PREFIX: `user-${Date.now() % 1_000_000}`, LOG_LEVEL: 'info' };
  const migrate = await npm(['run', 'migrate'], env);
  expect('failed' in migrate, migrate.stdout).toBe(false);
  // Oncehook's own migrations, then the project's one.
  const framework = (await readdir(path.join(ROOT, 'packages/core/src/migrations'))).filter((f) => f.endsWith('.sql')).length;
  expect(migrate.stdout).toMatch(new RegExp(`applied ${framework + 1} migration\\(s\\): .*app/0001_refunds\\.sql`));
  const ingest = spawnIn(project, [bin, 'ingest'], { ...env, PORT: '0', HOST: '127.0.0.1' });
  // The starter's start:worker script, without npm in between (signals reach the worker).
  const { scripts } = JSON.parse(await readFile(path.join(project, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  expect(scripts['start:worker']).toBe('oncehook worker --handlers ./dist/webhooks');
  const worker = spawnIn(project, [bin, 'worker', '--handlers', './dist/webhooks'], { ...env, METRICS_PORT: '0', RETRY_BACKOFF_MS: '20' });
  await waitFor(() => (/ingest listening on \d+/.test(ingest.output()) && worker.output().includes('worker ready')) || null, {
    timeoutMs: 60_000,
    what: `ingest and worker ready:\n${ingest.output()}\n${worker.output()}`,
  });
  expect(worker.output()).toContain('worker loaded 1 handler(s) from dist/webhooks/refunds.js');
  const url = `http://127.0.0.1:${/ingest listening on (\d+)/.exec(ingest.output())?.[1]}`;
  const deliver = (id: string, charge: string) => {
    const payload = JSON.stringify({
      id,
      object: 'event',
      type: 'charge.refunded',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: charge, amount_refunded: 700 } },
    });
    const signature = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET });
    return fetch(`${url}/webhooks/stripe`, { method: 'POST', body: payload, headers: { 'content-type': 'application/json', 'stripe-signature': signature } });
  };

  lap('migrate and start');
  // 6. Five concurrent deliveries of one refund: one row, one call.
  const answers = await Promise.all(Array.from({ length: 5 }, () => deliver('evt_refund_1', 'ch_1')));
  expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 202]);
  lap('five deliveries');
  // 7. Its API refusing a refund (422): a PermanentError from the handler's own SDK copy.
  expect((await deliver('evt_refund_bad', 'ch_bad')).status).toBe(202);

  const pool = createPool(database.url, { max: 1 });
  try {
    const runs = await waitFor(
      async () => {
        const { rows } = await pool.query<{ event_id: string; state: string; attempts: number; last_error: string | null }>(
          `SELECT e.event_id, r.state, r.attempts, r.last_error FROM oncehook.handler_runs r JOIN oncehook.events e ON e.id = r.event_row_id
            WHERE r.state IN ('done', 'failed') ORDER BY e.event_id`,
        );
        return rows.length === 2 ? rows : null;
      },
      { timeoutMs: 30_000, what: `both runs finished:\n${worker.output().slice(-3000)}` },
    );
    expect(runs).toEqual([
      { event_id: 'evt_refund_1', state: 'done', attempts: 1, last_error: null },
      { event_id: 'evt_refund_bad', state: 'failed', attempts: 1, last_error: expect.stringMatching(/PermanentError: .*422/) },
    ]);
    const { rows } = await pool.query('SELECT charge_id, amount_refunded, notification FROM refunds ORDER BY charge_id');
    expect(rows).toEqual([
      { charge_id: 'ch_1', amount_refunded: 700, notification: 'ntf_ch_1' },
      { charge_id: 'ch_bad', amount_refunded: 700, notification: null },
    ]);
    expect(calls.filter((c) => c.charge === 'ch_1')).toHaveLength(1);
    expect(calls.filter((c) => c.charge === 'ch_bad')).toHaveLength(1); // a 422 is not retried
    expect(calls.every((c) => c.key !== null)).toBe(true);
    // The worker counted the calls the handler's own SDK copy made (one observer registry for
    // every copy): webhook_outbound_calls_total{api="notify"}.
    const metricsPort = /worker metrics on (\d+)/.exec(worker.output())?.[1];
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/webhook_outbound_calls_total\{api="notify",outcome="ok"\} 1/);
    expect(metrics).toMatch(/webhook_outbound_calls_total\{api="notify",outcome="permanent"\} 1/);
  } finally {
    await pool.end();
  }
  ingest.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');

  lap('422');
  // 8. Its own test (npm test), with the test kit, run by its own vitest.
  const own = await npm(['test'], { ONCEHOOK_CHECK_DATABASE_URL: `${PG_BASE_URL}/postgres` });
  expect('failed' in own, own.stdout.slice(-3000)).toBe(false);
  expect(own.stdout).toMatch(/1 passed/);
  lap('its own test');
  console.log(`[figure] user-project: ${took.join(', ')}`);
});
