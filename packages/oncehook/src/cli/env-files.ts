/**
 * The environment of the `oncehook` command, read the way the ecosystem reads it (dotenv,
 * Vite, Next.js): the shell wins, then `.env.local`, then `.env`, both in the working directory
 * and both optional (KEY=value lines, `#` comments, quotes; Node's own parser, util.parseEnv).
 * `.env.local` is for this machine and is never committed; `.env` may be.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';

export const ENV_FILES = ['.env.local', '.env'] as const;

export interface LoadedEnv {
  env: Record<string, string>;
  /** The files read, most important first. */
  files: string[];
  /** Where each variable came from: the shell, or a file name. */
  origin: Record<string, string>;
}

/** `shell` over `.env.local` over `.env` (in `dir`). Does not change process.env. */
export function loadEnvFiles(dir: string, shell: NodeJS.ProcessEnv = process.env): LoadedEnv {
  const env: Record<string, string> = {};
  const origin: Record<string, string> = {};
  const files: string[] = [];
  for (const name of [...ENV_FILES].reverse()) {
    const file = path.join(dir, name);
    if (!existsSync(file)) continue;
    files.unshift(name);
    for (const [key, value] of Object.entries(parseEnv(readFileSync(file, 'utf8')))) {
      if (value === undefined) continue;
      env[key] = value;
      origin[key] = name;
    }
  }
  for (const [key, value] of Object.entries(shell)) {
    if (value === undefined) continue;
    env[key] = value;
    origin[key] = 'the shell';
  }
  return { env, files, origin };
}

/**
 * The running `oncehook dev` session: `oncehook dev` writes `.oncehook/dev.env` once its
 * processes are up (where its Postgres, queue and ingest are: an embedded Postgres's port is
 * only known then) and deletes it when it stops. The commands that talk to a running stack
 * (list, show, redrive, replay, redrive-all, send) read it beneath the shell and above the env
 * files, so `npx oncehook list` in a second terminal finds the dev database; a file left by a
 * dev that was killed names a process that is gone and is ignored.
 */
export const DEV_SESSION_FILE = path.join('.oncehook', 'dev.env');

/** `.oncehook/`, the local state of `oncehook dev` (its session file, the embedded Postgres). */
export const STATE_DIR = '.oncehook';

/** Creates `.oncehook/` in `projectDir` with a .gitignore that keeps it out of commits. */
export function makeStateDir(projectDir: string): string {
  const dir = path.join(projectDir, STATE_DIR);
  mkdirSync(dir, { recursive: true });
  const ignore = path.join(dir, '.gitignore');
  if (!existsSync(ignore)) writeFileSync(ignore, '# Local state of `oncehook dev` (its session, the embedded Postgres): never commit it.\n*\n');
  return dir;
}

/** Variables of the session file; ONCEHOOK_DEV_PID is the dev process, ONCEHOOK_DEV_URL its ingest. */
export function writeDevSession(dir: string, values: Record<string, string>): string {
  const file = path.join(makeStateDir(dir), 'dev.env');
  const lines = Object.entries({ ...values, ONCEHOOK_DEV_PID: String(process.pid) }).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  writeFileSync(file, `# written by oncehook dev (pid ${process.pid}) while it runs; deleted when it stops\n${lines.join('\n')}\n`, { mode: 0o600 });
  return file;
}

export function removeDevSession(dir: string): void {
  rmSync(path.join(dir, DEV_SESSION_FILE), { force: true });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * `loaded` with the running dev session's variables beneath the shell's (an env file's value
 * gives way to the session's: dev chose its database from the same files). `note` says what
 * was used or ignored, for stderr; null when there is no session file, or when the shell names
 * its own DATABASE_URL (then the session is not the stack meant).
 */
export function withDevSession(dir: string, loaded: LoadedEnv): { loaded: LoadedEnv; note: string | null } {
  const file = path.join(dir, DEV_SESSION_FILE);
  if (!existsSync(file)) return { loaded, note: null };
  // DATABASE_URL given in the shell names the stack to talk to: not the dev session's.
  if (loaded.origin.DATABASE_URL === 'the shell') return { loaded, note: null };
  const session = parseEnv(readFileSync(file, 'utf8'));
  const pid = Number(session.ONCEHOOK_DEV_PID);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) {
    return { loaded, note: `ignoring ${DEV_SESSION_FILE}: the oncehook dev that wrote it (pid ${session.ONCEHOOK_DEV_PID ?? '?'}) is not running` };
  }
  const env = { ...loaded.env };
  const origin = { ...loaded.origin };
  for (const [key, value] of Object.entries(session)) {
    if (value === undefined || origin[key] === 'the shell') continue;
    env[key] = value;
    origin[key] = DEV_SESSION_FILE;
  }
  return { loaded: { env, origin, files: [DEV_SESSION_FILE, ...loaded.files] }, note: `using the running oncehook dev (pid ${pid}, ${DEV_SESSION_FILE})` };
}
