/**
 * `oncehook <command>`: the one command, from a team's own project (`npx oncehook ...`) or
 * this repository (`npm run oncehook -- ...`). `oncehook --help` lists the commands,
 * `oncehook <command> --help` explains one.
 *
 * Every command reads the environment the same way (env-files.ts: the shell over .env.local
 * over .env, in the working directory) and exits 0 when done, 1 when it failed or was refused
 * (the reason printed), 2 on a usage mistake (the usage printed).
 */
import { isConfigError } from '@oncehook/sdk';
import { StartupError } from '@oncehook/shared';
import { backfillCommand } from './backfill-command.js';
import { type Command, UsageError } from './command.js';
import { destinationsCommand } from './destinations-command.js';
import { devCommand } from './dev-command.js';
import { loadEnvFiles, withDevSession } from './env-files.js';
import { migrateCommand } from './migrate-command.js';
import { operatorCommands } from './operator-commands.js';
import { ingestCommand, workerCommand } from './process-commands.js';
import { sendCommand } from './send-command.js';
import { writeErr } from './terminal.js';

export const COMMANDS: Command[] = [migrateCommand, ingestCommand, workerCommand, devCommand, ...operatorCommands, backfillCommand, destinationsCommand, sendCommand];

function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'usage: oncehook <command> [options]      (oncehook <command> --help for one command)',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Configuration: environment variables: the shell, then .env.local, then .env in the working',
    'directory (the shell always wins). Your handler modules see the same values in process.env',
    '(readSettings). Every variable: the README, "Configuration".',
  ].join('\n');
}

const helpOf = (c: Command) => `usage: ${c.usage}\n\n${c.help}\n`;

/**
 * Runs `oncehook <argv>`; resolves with the exit code, or 'running' for a command that runs
 * until a signal (its shutdown exits the process).
 */
export async function runCli(argv: string[], self: string[], options: { exportEnv?: boolean } = {}): Promise<number | 'running'> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const code = name === undefined ? 2 : 0;
    (code === 0 ? process.stdout : process.stderr).write(`${name === undefined ? 'no command given\n' : ''}${overview()}\n`);
    return code;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`oncehook: unknown command "${name.slice(0, 40)}"\n${overview()}\n`);
    return 2;
  }
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(helpOf(command));
    return 0;
  }
  const cwd = process.cwd();
  let loaded = loadEnvFiles(cwd);
  if (command.usesDevSession) {
    const session = withDevSession(cwd, loaded);
    loaded = session.loaded;
    if (session.note) process.stderr.write(`oncehook ${command.name}: ${session.note}\n`);
  }
  const { env, files } = loaded;
  // The handler modules a command loads (worker, ingest's sources file, dev's children) read
  // process.env: the env files' values go there too, beneath the shell's (never over a variable
  // the shell set). Only in the process itself: runCli in a test leaves the test's env alone.
  if (options.exportEnv) for (const [key, value] of Object.entries(env)) if (process.env[key] === undefined) process.env[key] = value;
  try {
    return await command.run(args, { env, envFiles: files, cwd, self });
  } catch (error) {
    if (error instanceof UsageError) {
      writeErr(`oncehook ${command.name}: ${error.message}\nusage: ${command.usage}`);
      return 2;
    }
    if (isConfigError(error) || error instanceof StartupError) {
      writeErr(`oncehook ${command.name}: ${(error as Error).message}`);
      return 1;
    }
    writeErr(`oncehook ${command.name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    return 1;
  }
}

/** The process: run the command named on the command line, exit with its code. */
export async function main(): Promise<void> {
  const entry = process.argv[1];
  if (!entry) throw new Error('oncehook: no entry script');
  const result = await runCli(process.argv.slice(2), [process.execPath, ...process.execArgv, entry], { exportEnv: true });
  if (result !== 'running') process.exit(result);
}
