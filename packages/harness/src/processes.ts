/**
 * Real child processes for crash tests: ingest, worker and migrate run as
 * `node --conditions=oncehook-source --import tsx <entry>` (a single process, so kill -9 hits the process that does the
 * work, not a wrapper).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { COMPILED_TREE_VARIABLE, toJs } from './compiled-tree.js';

/** The repository's root (where the processes run). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const ENTRIES = {
  ingest: 'apps/ingest/src/server.ts',
  worker: 'apps/worker/src/main.ts',
  migrate: 'packages/oncehook/src/cli/entry.ts',
  /** The `oncehook` command itself: args are the command and its flags. */
  cli: 'packages/oncehook/src/cli/entry.ts',
  sandbox: 'apps/sandbox/src/server.ts',
  'naive-baseline': 'scripts/bench/naive-server.ts',
  'verify-only': 'scripts/bench/verify-only-server.ts',
  /** The bench's peer pipelines: args `<graphile|bullmq|pgboss> <setup|ingest|worker>`. */
  peer: 'scripts/bench/peers.ts',
} as const;

export type ServiceKind = keyof typeof ENTRIES;

/**
 * How this repository runs Node on its TypeScript sources: tsx for the TypeScript, and the
 * `oncehook-source` export condition, under which @oncehook/* resolve to their src/ (without
 * it, to the compiled dist/ a published package carries). tsx by its file (its package's "."
 * export), so that a process started in another directory (a project of a test's own) finds it.
 */
export const SOURCE_NODE_ARGS = [
  '--conditions=oncehook-source',
  '--import',
  pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href,
  // Stops the process when it is orphaned (its starter was killed): exit-with-parent.mjs.
  '--import',
  pathToFileURL(path.join(ROOT, 'packages/harness/src/exit-with-parent.mjs')).href,
] as const;

/** The same, for JavaScript: what a process started from the test run's compiled tree gets. */
const COMPILED_NODE_ARGS = ['--conditions=oncehook-source', ...SOURCE_NODE_ARGS.slice(3)];

/** The test run's compiled tree (compiled-tree.ts), when the run built one. */
const compiledTree = (): string | undefined => process.env[COMPILED_TREE_VARIABLE] || undefined;

/**
 * Node's arguments to run `entry` (a path in this repository, relative to ROOT or absolute): its JavaScript in the test run's
 * compiled tree when there is one (a start costs half the CPU), else the source through tsx.
 */
export function nodeArgsFor(entry: string): string[] {
  const tree = compiledTree();
  const compiled = tree && path.join(tree, toJs(path.isAbsolute(entry) ? path.relative(ROOT, entry) : entry));
  return compiled && existsSync(compiled) ? [...COMPILED_NODE_ARGS, compiled] : [...SOURCE_NODE_ARGS, entry];
}

/**
 * ONCEHOOK_HANDLERS for a process started from the compiled tree: each relative path that the
 * tree holds (examples/shop, a fixture) becomes the tree's, so the handlers load as JavaScript
 * and share the tree's @oncehook/sdk. Other paths (a test's own project) stay as they are.
 */
function handlersInTree(value: string | undefined, tree: string): string | undefined {
  if (!value) return value;
  return value
    .split(',')
    .map((spec) => {
      const inTree = path.join(tree, toJs(spec.trim()));
      return !path.isAbsolute(spec.trim()) && existsSync(inTree) ? inTree : spec;
    })
    .join(',');
}

export interface Service {
  readonly kind: ServiceKind;
  readonly proc: ChildProcess;
  readonly pid: number;
  /** Every line printed so far (stdout and stderr). */
  readonly lines: string[];
  /** Resolves with the first line (past or future) matching the pattern. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** kill -9, and wait until it is gone. */
  kill9(): Promise<void>;
  /** SIGTERM and wait; returns the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
}

const running = new Set<Service>();

export function spawnService(kind: ServiceKind, env: Record<string, string>, args: string[] = [], options: { root?: string; nodeArgs?: string[] } = {}): Service {
  // `root`: another checkout of the repository (npm run attack measures an older release).
  // `nodeArgs`: flags for node itself (--cpu-prof: the bench's profiles).
  const tree = options.root ? undefined : compiledTree();
  const fullEnv: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'info', ...env };
  if (tree) fullEnv.ONCEHOOK_HANDLERS = handlersInTree(fullEnv.ONCEHOOK_HANDLERS, tree);
  const entryArgs = tree ? nodeArgsFor(ENTRIES[kind]) : [...SOURCE_NODE_ARGS, ENTRIES[kind]];
  const proc = spawn(process.execPath, [...(options.nodeArgs ?? []), ...entryArgs, ...(kind === 'migrate' ? ['migrate'] : []), ...args], {
    cwd: options.root ?? ROOT,
    env: fullEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const onData = (chunk: Buffer, carry: { rest: string }) => {
    const text = carry.rest + chunk.toString('utf8');
    const parts = text.split('\n');
    carry.rest = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (process.env.TEST_SHOW_LOGS) process.stderr.write(`[${kind} ${proc.pid}] ${line}\n`);
      for (const waiter of [...waiters]) {
        if (waiter.pattern.test(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  };
  const outCarry = { rest: '' };
  const errCarry = { rest: '' };
  proc.stdout?.on('data', (chunk: Buffer) => onData(chunk, outCarry));
  proc.stderr?.on('data', (chunk: Buffer) => onData(chunk, errCarry));

  // 'close', not 'exit': 'close' fires once the process has exited AND its stdout/stderr are
  // drained, so `lines` is complete when `exited` resolves ('exit' can come first).
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('close', (code, signal) => resolve({ code, signal }));
  });

  const service: Service = {
    kind,
    proc,
    pid: proc.pid ?? -1,
    lines,
    exited,
    waitFor(pattern, timeoutMs = 30_000) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`${kind} (pid ${proc.pid}) printed no line matching ${pattern} within ${timeoutMs}ms. Last lines:\n${lines.slice(-15).join('\n')}`));
        }, timeoutMs);
        const waiter = {
          pattern,
          resolve: (line: string) => {
            clearTimeout(timer);
            resolve(line);
          },
        };
        waiters.push(waiter);
        void exited.then(() => {
          if (!waiters.includes(waiter)) return;
          clearTimeout(timer);
          reject(new Error(`${kind} (pid ${proc.pid}) exited before printing ${pattern}. Last lines:\n${lines.slice(-15).join('\n')}`));
        });
      });
    },
    async kill9() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
      running.delete(service);
    },
    async stop(timeoutMs = 20_000) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      const { code } = await exited;
      clearTimeout(timer);
      running.delete(service);
      return code;
    },
  };
  running.add(service);
  return service;
}

/** For afterAll: kill -9 everything a test file spawned and did not stop itself. */
export async function killAllServices(): Promise<void> {
  await Promise.all([...running].map((service) => service.kill9()));
}
