/**
 * The shape of an `oncehook` command: its help, and `run`, which returns the exit code, or
 * 'running' for a process that runs until a signal stops it (ingest, worker, dev).
 *
 * Exit codes, every command: 0 done; 1 failed, refused or not found (the reason on stderr or in
 * the output); 2 a usage mistake (the usage is printed).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export interface CommandContext {
  /** The environment: the shell over .env.local over .env (env-files.ts). */
  env: Record<string, string>;
  /** Which env files were read. */
  envFiles: string[];
  cwd: string;
  /** How to run this same command again, as a child process: [node, ...flags, entry]. */
  self: string[];
}

export interface Command {
  name: string;
  /** One line for `oncehook --help`. */
  summary: string;
  usage: string;
  /** The rest of `oncehook <name> --help`. */
  help: string;
  /** Reads the running `oncehook dev` session (env-files.ts withDevSession): the commands that talk to a running stack. */
  usesDevSession?: boolean;
  run(args: string[], context: CommandContext): Promise<number | 'running'>;
}

/** A usage mistake: printed with the command's usage, exit code 2. */
export class UsageError extends Error {}

/**
 * How to run another `oncehook` command where this one runs, for the hints it prints: inside
 * this repository (npm scripts of the package named `oncehook`) `npm run oncehook --`, anywhere
 * else `npx oncehook` (the project's own install). A hint must be a command that works where it
 * is printed.
 */
export function invocation(env: Record<string, string | undefined>): string {
  // This repository: its root package is named `oncehook` AND holds the command's sources (a
  // team's project that happened to be named `oncehook` must not be told to run a script it
  // does not have).
  const root = env.npm_package_json ? path.dirname(env.npm_package_json) : null;
  const here = root !== null && existsSync(path.join(root, 'packages/oncehook/src/cli/entry.ts'));
  return env.npm_package_name === 'oncehook' && env.npm_lifecycle_event !== undefined && here ? 'npm run oncehook --' : 'npx oncehook';
}
