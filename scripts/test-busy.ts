/**
 * `npm run test:busy [-- --hogs N] [-- vitest args]`
 *
 * The suite on a busy machine: starts N CPU hogs of its own (default 1, a process spinning on
 * one core each), runs `npm test` while they spin, stops them, prints the load average it ran
 * under, and exits with the suite's exit code. A laptop compiling something, a CI runner
 * shared with other jobs: the suite must hold there too, and a test that only passes on an
 * idle machine waits for something it does not check (docs: README, "Tests").
 *
 * Arguments after `--` that are not `--hogs` go to vitest (`npm run test:busy -- test/x.test.ts`
 * runs one file busy, without the typecheck and lint).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';

const HELP = `npm run test:busy [-- --hogs N] [-- <vitest arguments>]

Runs the test suite while N processes of its own (default 1) spin on a CPU core each, then
stops them and exits with the suite's exit code. With vitest arguments (files, -t), runs only
those through vitest instead of the whole npm test.`;

function parse(argv: string[]): { hogs: number; vitestArgs: string[] } | string {
  let hogs = 1;
  const vitestArgs: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return HELP;
    if (arg === '--hogs') {
      i += 1;
      const value = Number(argv[i]);
      if (!Number.isInteger(value) || value < 0 || value > 64) return `--hogs takes a whole number from 0 to 64 (got ${argv[i] ?? 'nothing'})`;
      hogs = value;
    } else vitestArgs.push(arg);
  }
  return { hogs, vitestArgs };
}

function startHog(): ChildProcess {
  // A busy loop that checks nothing: one core at 100% until killed.
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

function run(command: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit' });
    child.on('close', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

async function main(): Promise<number> {
  const parsed = parse(process.argv.slice(2));
  if (typeof parsed === 'string') {
    const help = parsed === HELP;
    (help ? process.stdout : process.stderr).write(`${parsed}\n`);
    return help ? 0 : 2;
  }
  const hogs = Array.from({ length: parsed.hogs }, startHog);
  const stop = () => {
    for (const hog of hogs) hog.kill('SIGKILL');
  };
  process.on('SIGINT', () => {
    stop();
    process.exit(130);
  });
  const started = Date.now();
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(loadavg()[0]!), 5_000);
  process.stdout.write(`test:busy: ${parsed.hogs} CPU hog(s) spinning (pids ${hogs.map((h) => h.pid).join(', ') || 'none'}); load average now ${loadavg()[0]!.toFixed(2)}\n`);
  try {
    const code =
      parsed.vitestArgs.length > 0
        ? await run(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', ...parsed.vitestArgs])
        : await run(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['test']);
    const minutes = (Date.now() - started) / 60_000;
    const mean = samples.length ? samples.reduce((a, b) => a + b, 0) / samples.length : loadavg()[0]!;
    process.stdout.write(
      `test:busy: ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${minutes.toFixed(1)} min with ${parsed.hogs} hog(s); 1-minute load average mean ${mean.toFixed(1)}, max ${Math.max(0, ...samples).toFixed(1)}\n`,
    );
    return code;
  } finally {
    clearInterval(sampler);
    stop();
  }
}

process.exit(await main());
