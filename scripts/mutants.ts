/**
 * `npm run mutants [-- --only id,id] [--list] [--keep]`
 *
 * Checks that the tests guard the guarantees: for each mutant in scripts/mutants/catalog.ts,
 * in turn, it copies the repository to a scratch directory, applies the mutant there (files on
 * disk, so spawned worker and ingest processes run the mutated code too), runs only the test
 * files listed for it, and records whether a test failed (killed) or all passed (SURVIVED).
 * The working tree is never touched. Before the mutants it runs all their test files once
 * unmutated: a mutant "killed" by an already failing test would prove nothing.
 *
 * Where each mutant applies: scripts/mutants/locate.ts (a marker above the guard). Prints a
 * table (mutant, killed by, seconds) and exits 1 if any mutant survived or any rule no longer
 * matches the code. Not part of `npm test`: it takes several minutes.
 */
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MUTANTS, type Mutant } from './mutants/catalog.js';
import { findMarkers, locate } from './mutants/locate.js';
import { parseScriptArgs } from '@oncehook/harness';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Never copied: dependencies are linked, history and artifacts are not needed. */
const SKIP = new Set(['node_modules', '.git', 'test/artifacts', '.test-build']);

interface Outcome {
  mutant: Mutant;
  status: 'killed' | 'SURVIVED' | 'STALE RULE' | 'ERROR';
  killedBy: string;
  seconds: number;
}

/**
 * A scratch copy of the repository. node_modules holds links to the real packages, except the
 * workspace packages (@oncehook/*), which point at the scratch copy's own sources: with a
 * plain link to the real node_modules they would resolve to the unmutated tree.
 */
async function scratchCopy(into: string): Promise<void> {
  await cp(ROOT, into, { recursive: true, filter: (source) => !SKIP.has(path.relative(ROOT, source)) });
  const modules = path.join(into, 'node_modules');
  await mkdir(path.join(modules, '@oncehook'), { recursive: true });
  // Every workspace package by name, scoped or not (`oncehook` is not): each must resolve to the
  // scratch copy, or a test would load the unmutated package beside mutated ones (two copies
  // of one module: a mutant there survives, and classes compared across copies misbehave).
  const rootPackage = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { workspaces: string[] };
  const workspaces = new Map<string, string>();
  for (const workspace of rootPackage.workspaces) {
    const pkg = JSON.parse(await readFile(path.join(into, workspace, 'package.json'), 'utf8')) as { name: string };
    workspaces.set(pkg.name, workspace);
  }
  for (const entry of await readdir(path.join(ROOT, 'node_modules'))) {
    if (entry === '@oncehook' || workspaces.has(entry)) continue;
    await symlink(path.join(ROOT, 'node_modules', entry), path.join(modules, entry));
  }
  for (const [name, workspace] of workspaces) await symlink(path.join(into, workspace), path.join(modules, name));
}

/** Applies the mutant in the scratch copy; what is wrong with its rule when it cannot. */
async function apply(dir: string, mutant: Mutant, markers: Awaited<ReturnType<typeof findMarkers>>['at']): Promise<string | null> {
  const located = await locate(dir, mutant, markers);
  if ('problem' in located) return located.problem;
  for (const [file, text] of located.files) await writeFile(path.join(dir, file), text);
  return null;
}

interface VitestResult {
  code: number | null;
  failed: string[];
  /** Each failed test with the first lines of its failure message. */
  reasons: string[];
  output: string;
}

/** Runs vitest on the given files in `dir`; returns the failed tests ("file > name"). */
function vitest(dir: string, files: string[], timeoutMs: number): Promise<VitestResult> {
  const report = path.join(dir, `.vitest-report-${Date.now()}.json`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(dir, 'node_modules/vitest/vitest.mjs'), 'run', ...files, '--reporter=json', `--outputFile=${report}`], {
      cwd: dir,
      env: { ...process.env, FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: a timeout kills the tests' children too
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => {
      output += `\n(timed out after ${timeoutMs} ms)`;
      try {
        process.kill(-(child.pid ?? 0), 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, timeoutMs);
    child.on('close', async (code) => {
      clearTimeout(timer);
      const failed: string[] = [];
      const reasons: string[] = [];
      try {
        const json = JSON.parse(await readFile(report, 'utf8')) as {
          testResults: { name: string; message?: string; assertionResults: { status: string; fullName: string; failureMessages?: string[] }[] }[];
        };
        for (const file of json.testResults) {
          const rel = path.relative(dir, file.name);
          const bad = file.assertionResults.filter((a) => a.status === 'failed');
          for (const a of bad) {
            failed.push(`${rel} > ${a.fullName}`);
            reasons.push(`${rel} > ${a.fullName}\n    ${(a.failureMessages?.[0] ?? '').split('\n').slice(0, 3).join('\n    ')}`);
          }
          if (bad.length === 0 && file.message) failed.push(`${rel} (${file.message.split('\n')[0]})`);
        }
      } catch {
        /* no report: the run crashed or timed out; the exit code tells */
      }
      resolve({ code, failed, reasons, output });
    });
  });
}

function table(outcomes: Outcome[]): string {
  const rows = outcomes.map((o) => [o.mutant.id, o.status, o.killedBy, o.seconds.toFixed(0)]);
  const header = ['mutant', 'result', 'killed by (first failing test)', 's'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

async function main(): Promise<number> {
  const { values } = parseScriptArgs(import.meta.url, {
    options: {
      only: { type: 'string' },
      list: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      'skip-baseline': { type: 'boolean', default: false },
      'timeout-seconds': { type: 'string', default: '420' },
    },
  });
  const only = values.only?.split(',').map((s) => s.trim());
  const unknown = only?.filter((id) => !MUTANTS.some((m) => m.id === id)) ?? [];
  if (unknown.length > 0) {
    process.stderr.write(`unknown mutant(s): ${unknown.join(', ')}; --list shows them\n`);
    return 2;
  }
  const selected = only ? MUTANTS.filter((m) => only.includes(m.id)) : MUTANTS;
  if (values.list) {
    for (const m of selected) process.stdout.write(`${m.id.padEnd(28)} ${m.marker ? `marker ${m.marker}` : m.file}  (${m.guarantee})\n`);
    return 0;
  }
  const timeoutMs = Number(values['timeout-seconds']) * 1000;
  const base = await mkdtemp(path.join(tmpdir(), 'oncehook-mutants-'));
  process.stdout.write(`mutants: ${selected.length}, scratch copies under ${base}\n`);
  try {
    if (!values['skip-baseline']) {
      const files = [...new Set(selected.flatMap((m) => m.tests))];
      const dir = path.join(base, 'baseline');
      await scratchCopy(dir);
      process.stdout.write(`baseline: ${files.length} test files, unmutated ... `);
      const started = Date.now();
      const result = await vitest(dir, files, timeoutMs * 2);
      process.stdout.write(`${result.code === 0 ? 'green' : 'FAILED'} (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
      if (result.code !== 0) {
        process.stderr.write(`the unmutated tests fail, so no mutant result would mean anything:\n${result.reasons.join('\n') || result.output.slice(-3000)}\n`);
        return 1;
      }
    }

    const outcomes: Outcome[] = [];
    for (const mutant of selected) {
      const dir = path.join(base, mutant.id);
      await scratchCopy(dir);
      const started = Date.now();
      let outcome: Outcome;
      const stale = await apply(dir, mutant, (await findMarkers(dir)).at);
      if (stale !== null) {
        outcome = { mutant, status: 'STALE RULE', killedBy: stale, seconds: 0 };
      } else {
        const result = await vitest(dir, mutant.tests, timeoutMs);
        const seconds = (Date.now() - started) / 1000;
        if (result.code === 0) outcome = { mutant, status: 'SURVIVED', killedBy: '-', seconds };
        else if (result.failed.length > 0) outcome = { mutant, status: 'killed', killedBy: result.failed[0]!, seconds };
        else outcome = { mutant, status: 'killed', killedBy: `(vitest exit ${result.code}, no report: ${result.output.trim().split('\n').pop()})`, seconds };
      }
      outcomes.push(outcome);
      process.stdout.write(`${outcome.status.padEnd(10)} ${mutant.id.padEnd(28)} ${outcome.seconds.toFixed(0).padStart(4)} s  ${outcome.killedBy}\n`);
      if (!values.keep) await rm(dir, { recursive: true, force: true });
    }

    process.stdout.write(`\n${table(outcomes)}\n\n`);
    const bad = outcomes.filter((o) => o.status !== 'killed');
    process.stdout.write(
      bad.length === 0
        ? `all ${outcomes.length} mutants killed\n`
        : `${bad.length} of ${outcomes.length} mutants NOT killed: ${bad.map((o) => `${o.mutant.id} (${o.status})`).join(', ')}\n`,
    );
    return bad.length === 0 ? 0 : 1;
  } finally {
    if (!values.keep) await rm(base, { recursive: true, force: true });
  }
}

process.exit(await main());
