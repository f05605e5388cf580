/**
 * The protocol's model (model/protocol.pml) through the Spin model checker: `spin -a` writes
 * the verifier's C source, gcc compiles it, `./pan` explores every interleaving within the
 * bound. Shared by `npm run model` and test/protocol-model.test.ts.
 *
 * Spin and gcc are Debian packages (`apt-get install spin gcc`); `.ci/run` installs Spin.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from './processes.js';

const run = promisify(execFile);

export const MODEL_FILE = path.join(ROOT, 'model/protocol.pml');

/**
 * How far the checker looks: the faults' budgets (see the model's header). `small` is the one
 * `npm test` checks (3.4 million states, seconds); `medium` lets leases expire twice under live
 * workers (16 million states, about 40 s, 1 GB); `deep` also two crashes and two handler errors
 * (152 million states, about 11 minutes, 11 GB of memory).
 */
export const MODEL_BOUNDS = {
  small: { WORKERS: 2, DELIVERIES: 2, CRASHES: 1, QUEUE_LOSSES: 1, ERRORS: 1, REDRIVES: 1, EXPIRIES: 1, MAX_ATTEMPTS: 3 },
  medium: { WORKERS: 2, DELIVERIES: 2, CRASHES: 1, QUEUE_LOSSES: 1, ERRORS: 1, REDRIVES: 1, EXPIRIES: 2, MAX_ATTEMPTS: 3 },
  deep: { WORKERS: 2, DELIVERIES: 2, CRASHES: 2, QUEUE_LOSSES: 1, ERRORS: 2, REDRIVES: 1, EXPIRIES: 2, MAX_ATTEMPTS: 3 },
} as const;
export type ModelBound = keyof typeof MODEL_BOUNDS;

/** Each mutant of the model, the invariant its counterexample breaks (the assertion's text). */
export const MODEL_MUTANTS = {
  NO_FENCE: { what: 'the fence (LOCK_LEASED_RUN) without `lease_token = $2`', breaks: '(firstKey==0)|| !(recorded[0])' },
  SNAPSHOT_STEPS: { what: "the takeover reads the recorded steps in its lease statement's snapshot", breaks: '(firstKey==0)|| !(recorded[0])' },
  NO_RENEW_AT_STEP: { what: 'an external call made without RENEW_LEASE_AT_STEP proving the lease', breaks: '(firstKey==0)|| !(recorded[0])' },
  KEY_PER_ATTEMPT: { what: 'the outbound key derived from the lease token instead of the generation', breaks: '(tok==firstKey)' },
  LOCAL_OUTSIDE_TX: { what: "the local step's write committed on its own, outside its fenced transaction", breaks: '(effects[1]<=1)' },
  RECORD_BEFORE_CALL: { what: 'an external step recorded before its call', breaks: '(effects[0]==1))&&(effects[1]==1)' },
  NO_RECONCILER: { what: 'no reconciler: nothing finds a lost job again', breaks: '(( !(acked)||(evState==3))||(evState==4))' },
} as const;
export type ModelMutant = keyof typeof MODEL_MUTANTS;

export interface ModelResult {
  /** Assertion violations and invalid end states found (the search stops at the first). */
  errors: number;
  /** The failed assertion's text, if any. */
  violated: string | null;
  statesStored: number;
  transitions: number;
  depth: number;
  seconds: number;
  /** The search covered the whole state space (no memory bound hit, no depth cut). */
  complete: boolean;
  /** The counterexample: what each process did (the model's printf lines), in order. */
  trail: string[];
}

export interface ModelOptions {
  bound?: ModelBound;
  mutant?: ModelMutant;
  /** pan's memory limit in MB (-DMEMLIM): a search that needs more stops incomplete. */
  memoryMb?: number;
}

/** What to install when a tool is missing, or null when both are there. */
export async function missingModelTools(): Promise<string | null> {
  for (const [tool, args] of [
    ['spin', ['-V']],
    ['gcc', ['--version']],
  ] as const) {
    try {
      await run(tool, [...args]);
    } catch {
      return `${tool} is not installed: apt-get install spin gcc (the model checker and the compiler of its verifier)`;
    }
  }
  return null;
}

function number(text: string, pattern: RegExp): number {
  const match = pattern.exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

/** Checks the model within `bound` (default small), or a mutant of it, in a scratch directory. */
export async function checkModel(options: ModelOptions = {}): Promise<ModelResult> {
  const bound = MODEL_BOUNDS[options.bound ?? 'small'];
  const defines = Object.entries(bound).map(([name, value]) => `-D${name}=${value}`);
  if (options.mutant) defines.push(`-D${options.mutant}`);
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-model-'));
  try {
    await copyFile(MODEL_FILE, path.join(dir, 'protocol.pml'));
    await run('spin', ['-a', ...defines, 'protocol.pml'], { cwd: dir });
    // The model: depth-first with state compression (the whole space). A mutant: breadth-first,
    // so its counterexample is a shortest one.
    const search = options.mutant ? '-DBFS' : '-DCOLLAPSE';
    await run('gcc', ['-O2', '-DSAFETY', search, `-DMEMLIM=${options.memoryMb ?? 2048}`, '-o', 'pan', 'pan.c'], { cwd: dir });
    const started = performance.now();
    // pan exits 0 with or without errors; its report says which.
    const { stdout } = await run('./pan', ['-m1000000', '-n'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
    const seconds = (performance.now() - started) / 1000;
    const errors = number(stdout, /errors: (\d+)/);
    const violated = /assertion violated (.+?) \(at depth/.exec(stdout)?.[1]?.trim() ?? (stdout.includes('invalid end state') && errors > 0 ? 'invalid end state' : null);
    const cut = stdout.includes('reached -DMEMLIM bound') || stdout.includes('max search depth too small');
    let trail: string[] = [];
    if (errors > 0) {
      const replay = await run('spin', ['-t', ...defines, 'protocol.pml'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
      trail = replay.stdout
        .split('\n')
        .map((line) => line.trim())
        .filter(
          (line) =>
            line !== '' &&
            !/^\d+:/.test(line) &&
            !line.startsWith('spin: trail ends') &&
            !line.startsWith('#processes') &&
            !/^\w+(\[\d+\])? = /.test(line) &&
            !/processes? created$/.test(line),
        );
    }
    return {
      errors,
      violated,
      statesStored: number(stdout, /([\d.e+]+) states, stored/),
      transitions: number(stdout, /([\d.e+]+) transitions/),
      depth: number(stdout, /depth reached (\d+)/),
      seconds,
      complete: errors === 0 && !cut,
      trail,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
