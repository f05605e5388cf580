/**
 * What the Docker image runs, run here without Docker: `npm run build` type-checks with tsc and
 * emits JavaScript; then migrate, ingest and a worker run from dist/ with plain `node`
 * (`--conditions=oncehook-dist`, as the image sets it), the worker loading a handler module of a
 * user's written in TypeScript (loaded through tsx on demand), which imports @oncehook/sdk: its
 * event is handled, and its PermanentError is recognised (one copy of each package at run time).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createEmptyDatabase, freePort, REDIS_URL, ROOT, signStripe, STRIPE_SECRET, waitFor } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { afterAll, expect, it } from 'vitest';

const children: ChildProcess[] = [];
const HANDLERS_DIR = path.join(ROOT, 'my-handlers-build-test');
let dropDatabase: (() => Promise<void>) | undefined;

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await rm(HANDLERS_DIR, { recursive: true, force: true });
  await dropDatabase?.();
});

function node(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  return { child, output: () => output, exited: new Promise((resolve) => child.on('close', (code) => resolve(code))) };
}

const USER_HANDLER = `import { defineHandler, PermanentError } from '@oncehook/sdk';

// A user's module, in TypeScript, outside the framework's packages.
export default [
  defineHandler({ name: 'user.refunds', source: 'stripe', type: 'charge.refunded' }, async (event, ctx) => {
    const refunded: number = event.payload.data.object.amount_refunded;
    await ctx.transaction('note-refund', async () => ({ refunded }), { final: true });
  }),
  defineHandler({ name: 'user.disputes', source: 'stripe', type: 'charge.dispute.created' }, async () => {
    throw new PermanentError('disputes are handled by a human');
  }),
];
`;

it('npm run build type-checks and emits JavaScript that migrates, ingests and runs a TypeScript handler module with plain node', async () => {
  const build = node(['--import', 'tsx', 'scripts/build.ts'], {});
  expect(await build.exited, build.output()).toBe(0);
  expect(build.output()).toContain('build: tsc --noEmit (type check)');
  expect(build.output()).toContain('build: apps/worker/dist');

  const database = await createEmptyDatabase(undefined, 'oncehook_build');
  dropDatabase = database.drop;
  const dist = ['--conditions=oncehook-dist'];
  const migrate = node([...dist, 'packages/shared/dist/migrate-cli.js'], { DATABASE_URL: database.url });
  expect(await migrate.exited, migrate.output()).toBe(0);
  expect(migrate.output()).toMatch(/applied 9 migration\(s\): oncehook\/0001_schema\.sql, oncehook\/0002/);

  await mkdir(HANDLERS_DIR, { recursive: true });
  await writeFile(path.join(HANDLERS_DIR, 'refunds.ts'), USER_HANDLER);
  const port = await freePort();
  const common = { DATABASE_URL: database.url, REDIS_URL, QUEUE_PREFIX: `build-${port}`, LOG_LEVEL: 'info' };
  const ingest = node([...dist, 'apps/ingest/dist/server.js'], { ...common, STRIPE_WEBHOOK_SECRET: STRIPE_SECRET, PORT: String(port), HOST: '127.0.0.1' });
  const worker = node([...dist, 'apps/worker/dist/main.js'], { ...common, ONCEHOOK_HANDLERS: 'my-handlers-build-test/refunds.ts', METRICS_PORT: '0', RETRY_BACKOFF_MS: '20' });
  await waitFor(() => (ingest.output().includes('ingest listening') && worker.output().includes('worker ready')) || null, {
    timeoutMs: 30_000,
    what: `both ready:\n${ingest.output()}\n${worker.output()}`,
  });
  expect(worker.output()).toContain('"handler":"user.refunds"');

  const now = Math.floor(Date.now() / 1000);
  const send = (event: object) => fetch(`http://127.0.0.1:${port}/webhooks/stripe`, { method: 'POST', ...signStripe(event) });
  expect((await send({ id: 'evt_build_refund', object: 'event', type: 'charge.refunded', created: now, data: { object: { id: 'ch_1', amount_refunded: 700 } } })).status).toBe(202);
  expect((await send({ id: 'evt_build_dispute', object: 'event', type: 'charge.dispute.created', created: now, data: { object: { id: 'dp_1' } } })).status).toBe(202);

  const pool = createPool(database.url, { max: 1 });
  try {
    const runs = await waitFor(
      async () => {
        const { rows } = await pool.query<{ handler: string; state: string; attempts: number; last_error: string | null }>(
          `SELECT handler, state, attempts, last_error FROM oncehook.handler_runs WHERE state IN ('done', 'failed') ORDER BY handler`,
        );
        return rows.length === 2 ? rows : null;
      },
      { timeoutMs: 20_000, what: 'both runs finished' },
    );
    // The user's PermanentError (from @oncehook/sdk's dist) is the worker's: failed at once, not retried.
    expect(runs).toEqual([
      { handler: 'user.disputes', state: 'failed', attempts: 1, last_error: expect.stringContaining('PermanentError: disputes are handled by a human') },
      { handler: 'user.refunds', state: 'done', attempts: 1, last_error: null },
    ]);
    const { rows } = await pool.query<{ result: unknown }>(`SELECT result FROM oncehook.steps WHERE name = 'note-refund'`);
    expect(rows).toEqual([{ result: { refunded: 700 } }]);
  } finally {
    await pool.end();
  }
  ingest.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  expect(await ingest.exited).toBe(0);
  expect(await worker.exited).toBe(0);
});
