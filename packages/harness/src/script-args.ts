/**
 * The command line of a long-running script (`npm run bench|chaos|attack|mutants|bench:claims|
 * bench:keys`): `--help` (or `-h`) prints the script's own header comment, its usage and what
 * it does, and exits 0; an unknown option or a bad value prints what was wrong and the usage,
 * and exits 2, before anything starts.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The leading `/** ... *\/` comment of a file, without its comment markers. */
export function headerOf(file: string): string {
  const text = readFileSync(file, 'utf8');
  const match = /^\s*\/\*\*([\s\S]*?)\*\//.exec(text);
  if (!match) return '';
  return match[1]!
    .split('\n')
    .map((line) => line.replace(/^\s*\* ?/, ''))
    .join('\n')
    .trim();
}

/** parseArgs (strict) with `--help` and a usage-error exit (2). `script` is the caller's import.meta.url. */
export function parseScriptArgs<T extends ParseArgsConfig>(script: string, config: T): ReturnType<typeof parseArgs<T>> {
  const file = fileURLToPath(script);
  const args = config.args ?? process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${headerOf(file)}\n`);
    process.exit(0);
  }
  try {
    return parseArgs(config);
  } catch (error) {
    const usage = headerOf(file).split('\n\n')[0] ?? '';
    process.stderr.write(`${(error as Error).message}\n${usage}\n(--help for more)\n`);
    process.exit(2);
  }
}

/** A count option of a script: a whole number of 1 or more, else the usage-error exit (2) before anything starts. */
export function countArg(option: string, raw: string | undefined): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    process.stderr.write(`${option} must be a whole number of 1 or more (got "${raw ?? ''}")\n`);
    process.exit(2);
  }
  return value;
}
