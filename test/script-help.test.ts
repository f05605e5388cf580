/**
 * Every long-running script answers `--help` with its own header (usage and what it does) and
 * refuses an unknown option with exit code 2 before it starts anything (issue 25).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { headerOf, ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { describe, expect, it } from 'vitest';

const SCRIPTS: Record<string, string> = {
  bench: 'scripts/bench.ts',
  chaos: 'scripts/chaos.ts',
  attack: 'scripts/attack.ts',
  mutants: 'scripts/mutants.ts',
  'bench:claims': 'scripts/bench-claims.ts',
  'bench:keys': 'scripts/bench-keys.ts',
  'bench:cluster': 'scripts/bench-cluster.ts',
  'bench:search': 'scripts/bench-search.ts',
  'bench:peer-faults': 'scripts/bench-peer-faults.ts',
  'bench:backlog': 'scripts/bench-backlog.ts',
  'bench:round-trips': 'scripts/bench-round-trips.ts',
  model: 'scripts/model.ts',
  soak: 'scripts/soak.ts',
};

describe('long-running scripts', () => {
  it.each(Object.entries(SCRIPTS))('npm run %s: parses its options with parseScriptArgs and documents its usage in its header', (name, file) => {
    const text = readFileSync(path.join(ROOT, file), 'utf8');
    expect(text).toContain('parseScriptArgs(import.meta.url');
    expect(text).not.toMatch(/\bparseArgs\(/);
    expect(headerOf(path.join(ROOT, file))).toMatch(new RegExp(`^\`npm run ${name}`));
    const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts[name]).toContain(file);
  });

  it('the processes: --help prints the header and exits 0; an unknown option exits 2 with the usage, before anything runs', () => {
    const help = spawnSync(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/chaos.ts', '--help'], { cwd: ROOT, encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toBe(`${headerOf(path.join(ROOT, 'scripts/chaos.ts'))}\n`);
    const bad = spawnSync(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/chaos.ts', '--event', '5'], { cwd: ROOT, encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/Unknown option '--event'/);
    expect(bad.stderr).toContain('npm run chaos');
    expect(bad.stdout).toBe('');
  });

  it('chaos and bench:cluster refuse a count that is not a whole number, before anything runs (countArg)', () => {
    for (const [file, option, value, named] of [
      ['scripts/chaos.ts', '--events', 'ten', 'ten'],
      ['scripts/chaos.ts', '--workers', '0', '0'],
      ['scripts/chaos.ts', '--limited-slots', '1.5', '1.5'],
      ['scripts/bench-cluster.ts', '--rounds', '0.5', '0.5'],
      // A list option names the one bad element.
      ['scripts/bench-cluster.ts', '--shards', '1,x,4', 'x'],
    ] as const) {
      const bad = spawnSync(process.execPath, [...SOURCE_NODE_ARGS, file, option, value], { cwd: ROOT, encoding: 'utf8' });
      expect(bad.status, `${file} ${option} ${value}`).toBe(2);
      expect(bad.stderr).toContain(`${option} must be a whole number of 1 or more (got "${named}")`);
      expect(bad.stdout).toBe('');
    }
  });
});
