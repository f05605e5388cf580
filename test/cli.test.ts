/**
 * The `oncehook` command (issue 22): help on every command, exit codes (0 done, 1 failed or
 * refused, 2 a usage mistake), the environment read the way the ecosystem reads it (the shell
 * over .env.local over .env), and the strict migration runner (a file it would skip is an
 * error naming it; a missing folder is one line).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createScratchDatabase, ROOT, nodeArgsFor } from '@oncehook/harness';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnvFiles, withDevSession } from '../packages/oncehook/src/cli/env-files.js';
import { COMMANDS } from '../packages/oncehook/src/cli/main.js';
import { where } from '../packages/oncehook/src/cli/connections.js';
import { runCliHere } from './helpers/cli-here.js';

const ENTRY = path.join(ROOT, 'packages/oncehook/src/cli/entry.ts');
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'oncehook-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function oncehook(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...nodeArgsFor(ENTRY), ...args], {
      cwd: options.cwd ?? ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...options.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('help and exit codes', () => {
  it('oncehook --help lists every command; no command is a usage mistake (2); an unknown one too', async () => {
    const help = await oncehook(['--help']);
    expect(help.code).toBe(0);
    for (const command of COMMANDS) expect(help.stdout).toContain(`  ${command.name}`);
    // The process proves exit 0 here and 2 and 1 below; the other mistakes in this process.
    expect((await runCliHere([])).code).toBe(2);
    const unknown = await runCliHere(['migrat']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "migrat"/);
  });

  // In process (helpers/cli-here.ts): a process per command would cost a second of CPU each;
  // the processes above and below prove the process wiring.
  it.each(COMMANDS.map((c) => [c.name]))('oncehook %s --help prints its usage and exits 0', async (name) => {
    const { code, stdout } = await runCliHere([name, '--help']);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`^usage: oncehook ${name.replace('-', '\\-')}`));
    expect(stdout.length).toBeGreaterThan(120); // a paragraph of help, not only the usage line
  });

  it('usage mistakes exit 2 with the usage; refusals exit 1 with the reason', async () => {
    const badFlag = await oncehook(['worker', '--handler', 'x']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/oncehook worker: .*--handler.*\nusage: oncehook worker/s);
    const extra = await runCliHere(['ingest', 'now']);
    expect(extra.code).toBe(2);
    const config = await oncehook(['ingest'], { env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/x', LEASE_MS: 'soon' } });
    expect(config.code).toBe(1);
    expect(config.stderr).toMatch(/oncehook ingest: /);
  });
});

describe('how the command names a database or a Redis', () => {
  it('host, port and database (Redis database 0 being the default), never credentials', () => {
    expect(where('redis://:pw@cache.internal:6380/3')).toBe('cache.internal:6380/3');
    expect(where('redis://cache.internal/0')).toBe('cache.internal:6379');
    expect(where('postgres://app:secret@db.internal/billing')).toBe('db.internal:5432/billing');
    expect(where('not a url')).toBe('an unparsable URL');
  });
});

describe('a database that does not answer', () => {
  it('an operator command prints one line naming the database (never its password) and exits 1', async () => {
    const { port } = await new Promise<{ port: number }>((resolve) => {
      // A port nothing listens on: taken, then released.
      const probe = spawnSync(process.execPath, ['-e', "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"]);
      resolve({ port: Number(probe.stdout.toString().trim()) });
    });
    // In this process (the exit codes of the entry point itself: the tests above).
    const commands = [['list'], ['show', 'stripe/evt_1'], ['paused']];
    for (const command of commands) {
      const down = await runCliHere(command, { DATABASE_URL: `postgres://app:s3cret-pw@127.0.0.1:${port}/billing`, QUEUE_BACKEND: 'postgres' });
      expect(down.code, down.stderr).toBe(1);
      expect(down.stderr.trim().split('\n')).toEqual([
        `oncehook ${command[0]}: cannot reach Postgres at 127.0.0.1:${port}/billing (DATABASE_URL): nothing accepts connections there (ECONNREFUSED). Start it, or point DATABASE_URL at it`,
      ]);
      expect(down.stdout + down.stderr).not.toContain('s3cret-pw');
    }
  });
});

describe('the environment: the shell over .env.local over .env', () => {
  it('reads both files in the working directory, the shell winning', async () => {
    const project = path.join(dir, 'env');
    await mkdir(project, { recursive: true });
    await writeFile(path.join(project, '.env'), 'A=from-env\nB=from-env\nC=from-env\n');
    await writeFile(path.join(project, '.env.local'), 'B=from-local\nC=from-local\n');
    const { env, files, origin } = loadEnvFiles(project, { C: 'from-shell' });
    expect(files).toEqual(['.env.local', '.env']);
    expect({ A: env.A, B: env.B, C: env.C }).toEqual({ A: 'from-env', B: 'from-local', C: 'from-shell' });
    expect(origin).toMatchObject({ A: '.env', B: '.env.local', C: 'the shell' });
  });

  it('the command uses them: a bad LEASE_MS in .env refuses the worker, the shell overrides it', async () => {
    const project = path.join(dir, 'env-cmd');
    await mkdir(project, { recursive: true });
    await writeFile(path.join(project, '.env'), 'LEASE_MS=soon\n');
    const refused = await oncehook(['worker'], { cwd: project });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/LEASE_MS/);
    // The shell's value wins: LEASE_MS passes, and only the other bad setting is reported.
    const overridden = await oncehook(['worker'], { cwd: project, env: { LEASE_MS: '30000', WORKER_CONCURRENCY: 'lots' } });
    expect(overridden.code).toBe(1);
    expect(overridden.stderr).toMatch(/WORKER_CONCURRENCY/);
    expect(overridden.stderr).not.toMatch(/LEASE_MS/);
  });

  it("a running oncehook dev's session file is read beneath the shell by the commands that talk to the stack; one left by a dead dev is ignored", async () => {
    const project = path.join(dir, 'session');
    await mkdir(path.join(project, '.oncehook'), { recursive: true });
    await writeFile(path.join(project, '.env'), 'DATABASE_URL=postgres://from-env-file/x\n');
    const session = (pid: number) => `DATABASE_URL="postgres://from-session/x"\nONCEHOOK_DEV_PID="${pid}"\n`;
    await writeFile(path.join(project, '.oncehook/dev.env'), session(process.pid));
    const live = withDevSession(project, loadEnvFiles(project, {}));
    expect(live.loaded.env.DATABASE_URL).toBe('postgres://from-session/x');
    expect(live.note).toMatch(/using the running oncehook dev/);
    // DATABASE_URL from the shell names another stack: the session is not read at all (no note,
    // none of its other variables), so a dev running in the same folder changes nothing.
    const shell = withDevSession(project, loadEnvFiles(project, { DATABASE_URL: 'postgres://from-shell/x' }));
    expect(shell.loaded.env.DATABASE_URL).toBe('postgres://from-shell/x');
    expect(shell.note).toBeNull();
    // A pid that is not running (a dev killed with -9 leaves its file behind).
    const gone = spawnSync(process.execPath, ['-e', 'process.exit(0)']).pid;
    await writeFile(path.join(project, '.oncehook/dev.env'), session(gone));
    const stale = withDevSession(project, loadEnvFiles(project, {}));
    expect(stale.loaded.env.DATABASE_URL).toBe('postgres://from-env-file/x');
    expect(stale.note).toMatch(/ignoring \.oncehook\/dev\.env: the oncehook dev that wrote it \(pid \d+\) is not running/);
    // migrate, ingest and worker never read it: production is configured, not found.
    expect(COMMANDS.filter((c) => c.usesDevSession).map((c) => c.name)).toEqual([
      'list',
      'show',
      'redrive',
      'replay',
      'pause',
      'resume',
      'paused',
      'redrive-all',
      'failures',
      'resolve',
      'backfill',
      'destinations',
      'send',
    ]);
  });
});

describe('oncehook migrate is strict about its folders', () => {
  it('a file it would not apply (001_paid_invoices.sql) is an error naming it and the pattern, and nothing is applied', async () => {
    const database = await createScratchDatabase({ prefix: 'oncehook_cli' });
    try {
      const migrations = path.join(dir, 'migrations');
      await mkdir(migrations, { recursive: true });
      await writeFile(path.join(migrations, '001_paid_invoices.sql'), 'create table paid_invoices (id text primary key);\n');
      await writeFile(path.join(migrations, 'README.md'), 'notes beside migrations are fine\n');
      // In this process: what the runner refuses, not the process wiring (tested above).
      const result = await runCliHere(['migrate', '--dir', migrations, '--set', 'billing'], { DATABASE_URL: database.url });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/"001_paid_invoices\.sql" is not a migration the runner applies: name each NNNN_name\.sql .*e\.g\. 0001_paid_invoices\.sql/);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stdout).not.toMatch(/applied/);
      const missing = await runCliHere(['migrate', '--dir', path.join(dir, 'nope')], { DATABASE_URL: database.url });
      expect(missing.code).toBe(1);
      expect(missing.stderr.trim()).toBe(`oncehook migrate: migrations folder ${path.join(dir, 'nope')} does not exist: check --dir`);
      const noSet = await runCliHere(['migrate', '--dir', 'a', '--dir', 'b'], { DATABASE_URL: database.url });
      expect(noSet.code).toBe(2);
    } finally {
      await database.drop();
    }
  });
});
