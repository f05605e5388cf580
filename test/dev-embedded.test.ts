/**
 * `oncehook dev` on a machine with Node and nothing else (issue 22): run in a network namespace
 * of its own, where nothing listens (no Postgres on 5432, no Redis on 6379), it starts an
 * embedded Postgres with its data in the project's `.oncehook/`, puts the queue in it, and a
 * signed event sent with `oncehook send` is recorded and done; Ctrl-C (SIGINT to the whole
 * process group) stops everything cleanly, the embedded Postgres last: exit 0, no warning. (Creating a network namespace needs root and iproute2, which CI
 * has; elsewhere the test says what it needs instead of running.)
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT, nodeArgsFor, waitFor } from '@oncehook/harness';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { toolsRequired } from './helpers/tools.js';

const NAMESPACE = `oh-dev-${randomBytes(3).toString('hex')}`;
const ENTRY = path.join(ROOT, 'packages/oncehook/src/cli/entry.ts');
const canNamespace = process.getuid?.() === 0 && spawnSync('ip', ['-V']).status === 0;
let project: string;

beforeAll(async () => {
  project = await mkdtemp(path.join(tmpdir(), 'oncehook-dev-'));
  // An ordinary project directory (mkdtemp's are private: 0700), which the embedded Postgres,
  // run as the user postgres under root, can enter.
  await chmod(project, 0o755);
  if (canNamespace) {
    execFileSync('ip', ['netns', 'add', NAMESPACE]);
    execFileSync('ip', ['netns', 'exec', NAMESPACE, 'ip', 'link', 'set', 'lo', 'up']);
  }
});
afterAll(async () => {
  if (canNamespace) spawnSync('ip', ['netns', 'del', NAMESPACE]);
  await rm(project, { recursive: true, force: true });
});

/** `detached`: the command leads a process group of its own, as a shell's foreground job does. */
function inNamespace(args: string[], options: { detached?: boolean } = {}) {
  return spawn('ip', ['netns', 'exec', NAMESPACE, process.execPath, ...nodeArgsFor(ENTRY), ...args], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
  });
}

async function runInNamespace(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = inNamespace(args);
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, output };
}

it('with no Postgres and no Redis anywhere: an embedded Postgres in .oncehook/, the queue in it, a signed event done; Ctrl-C stops it all cleanly', {
  timeout: 180_000,
}, async () => {
  if (!canNamespace) {
    const why = 'needs root and iproute2 (ip netns) to make a machine with nothing listening';
    if (toolsRequired()) throw new Error(`dev-embedded: ${why}`);
    console.log(`SKIPPED: dev-embedded.test.ts ${why}`);
    return;
  }
  const dev = inNamespace(['dev', '--workers', '1'], { detached: true });
  let output = '';
  dev.stdout.on('data', (c: Buffer) => (output += c.toString()));
  dev.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => dev.on('close', resolve));
  let interruptedAt = 0;
  try {
    await waitFor(() => output.includes('oncehook is up') || dev.exitCode !== null || null, { timeoutMs: 120_000, what: 'the banner' });
    expect(output, output).toMatch(/no DATABASE_URL and no Postgres at 127\.0\.0\.1:5432: starting an embedded Postgres/);
    expect(output, output).toMatch(/embedded Postgres created and started in .*\.oncehook\/postgres/);
    expect(output).toMatch(/an embedded Postgres \(.*\), the queue in that Postgres/);

    // Another terminal finds this stack through .oncehook/dev.env: no URL, no DATABASE_URL given.
    const sent = await runInNamespace(['send', 'stripe', 'payment_intent.succeeded', '--id', 'evt_dev_embedded']);
    expect(sent.code, sent.output).toBe(0);
    expect(sent.output).toMatch(/using the running oncehook dev \(pid \d+, \.oncehook\/dev\.env\)/);
    expect(sent.output).toMatch(/#1 -> 202 accepted/);
    // Recorded and done: no handler is loaded, so the event is done at once, with a note.
    let listed = { code: null as number | null, output: '' };
    await waitFor(
      async () => {
        listed = await runInNamespace(['list', '--provider', 'stripe']);
        return /evt_dev_embedded/.test(listed.output) && /\bdone\b/.test(listed.output) ? true : null;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: 'the event done in the embedded Postgres' },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n--- oncehook list:\n${listed.output}\n--- oncehook dev:\n${output.slice(-4000)}`);
    });
  } finally {
    // Ctrl-C in a terminal: SIGINT to the whole foreground group (dev, ingest, the worker).
    interruptedAt = output.length;
    if (dev.pid) process.kill(-dev.pid, 'SIGINT');
  }
  expect(await exited, output.slice(-3000)).toBe(0);
  // A clean stop: the processes first, the database last; nothing warns, nothing is unhandled.
  const stopping = output.slice(interruptedAt).split('\n');
  expect(stopping.filter((line) => /\b(WARN|ERROR|FATAL)\b|Unhandled|uncaught|57P0[13]/i.test(line))).toEqual([]);
  // The session file went with it: a later `oncehook list` does not reach for a stopped stack.
  expect(existsSync(path.join(project, '.oncehook/dev.env'))).toBe(false);
  const after = await runInNamespace(['list']);
  expect(after.code).toBe(1);
  expect(after.output).not.toMatch(/using the running oncehook dev/);
  // The embedded Postgres went with it.
  const left = spawnSync('pgrep', ['-f', path.join(project, '.oncehook/postgres')]);
  expect(left.stdout.toString().trim()).toBe('');
});
