/**
 * One `oncehook` command run in this process (runCli, what the entry point runs), its output
 * captured: a process per command would cost a second of CPU, so tests of refusals and of
 * what a command prints use this, and test/cli.test.ts proves the process wiring (exit codes
 * from the real entry point). Not for concurrent use: process.env and the standard streams
 * belong to the whole test process.
 */
import { vi } from 'vitest';
import { runCli } from '../../packages/oncehook/src/cli/main.js';

export interface CliResult {
  code: number | 'running';
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved, as a terminal shows them. */
  output: string;
}

/** Runs `args` with `env` over process.env for the command's duration ('' unsets a variable). */
export async function runCliHere(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const result = { stdout: '', stderr: '', output: '' };
  const capture = (stream: 'stdout' | 'stderr') => (chunk: string | Uint8Array) => {
    result[stream] += String(chunk);
    result.output += String(chunk);
    return true;
  };
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(capture('stdout'));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(capture('stderr'));
  const saved = { ...process.env };
  Object.assign(process.env, env);
  for (const [name, value] of Object.entries(env)) if (value === '') delete process.env[name];
  try {
    return { code: await runCli(args, []), ...result };
  } finally {
    out.mockRestore();
    err.mockRestore();
    process.env = saved;
  }
}
