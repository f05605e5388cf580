/**
 * `npm run build`: the packages a registry can serve, and the JavaScript the image runs.
 *
 * 1. Type-checks the whole repository with tsc (TypeScript 7, typescript-native) (`tsc --noEmit`, sources through the
 *    oncehook-source condition): a type error anywhere fails the build. `--no-check` skips
 *    it, for a caller that has just type-checked (test/user-project.test.ts under npm test).
 * 2. Emits each published package with tsc, in the order of the `@oncehook/*` dependencies
 *    their package.json declare (buildOrder: sdk, shared, providers, core, testkit, oncehook today):
 *    `<package>/dist/` gets its JavaScript, its `.d.ts` (with declaration maps) and
 *    source maps, file for file. Each package resolves its siblings through their dist/ (no
 *    source condition in tsconfig.build.json), exactly as an installed copy does: a package
 *    that only compiles against its siblings' sources fails here.
 * 3. Copies what code reads next to itself at run time: the migrations (core) and the admin's
 *    script (oncehook).
 *
 * `exports` of each package point at dist/ by default (what `npm install` users get); this
 * repository's tools ask for src/ with `--conditions=oncehook-source`.
 */
import { execFileSync } from 'node:child_process';
import { cp, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';

interface PackageBuild {
  dir: string;
  /** Files or directories copied into dist after the emit (source -> destination, relative to the package). */
  copy?: [string, string][];
}

/** The published packages; buildOrder puts each after the packages it depends on. */
export const BUILDS: PackageBuild[] = [
  { dir: 'packages/sdk' },
  { dir: 'packages/shared' },
  { dir: 'packages/providers' },
  {
    dir: 'packages/core',
    // migrate.ts reads these next to itself (import.meta.url).
    copy: [
      ['src/migrations', 'dist/migrations'],
      ['src/legacy', 'dist/legacy'],
      ['src/legacy-upgrade.sql', 'dist/legacy-upgrade.sql'],
    ],
  },
  // The admin pages read their script next to themselves (views.ts).
  { dir: 'packages/oncehook', copy: [['src/ingest/admin/assets', 'dist/ingest/admin/assets']] },
  { dir: 'packages/testkit' },
];

/**
 * BUILDS sorted so that every package comes after the `@oncehook/*` packages its package.json
 * depends on (a package compiles against its siblings' dist/, so they must exist first). A
 * dependency on a package that is not in BUILDS, or a cycle, fails the build.
 */
export async function buildOrder(builds: PackageBuild[] = BUILDS): Promise<PackageBuild[]> {
  const byName = new Map<string, { build: PackageBuild; deps: string[] }>();
  for (const build of builds) {
    const manifest = JSON.parse(await readFile(path.join(ROOT, build.dir, 'package.json'), 'utf8')) as {
      name: string;
      dependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const deps = Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }).filter((name) => name.startsWith('@oncehook/') || name === 'oncehook');
    byName.set(manifest.name, { build, deps });
  }
  const ordered: PackageBuild[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (name: string, from: string): void => {
    const entry = byName.get(name);
    if (!entry) throw new Error(`${from} depends on ${name}, which scripts/build.ts does not build: add it to BUILDS`);
    if (state.get(name) === 'done') return;
    if (state.get(name) === 'visiting') throw new Error(`the packages depend on each other in a cycle through ${name}`);
    state.set(name, 'visiting');
    for (const dep of entry.deps) visit(dep, name);
    state.set(name, 'done');
    ordered.push(entry.build);
  };
  for (const name of byName.keys()) visit(name, name);
  return ordered;
}

const tsc = path.join(ROOT, 'node_modules/typescript-native/bin/tsc');

async function countFiles(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true });
  return entries.filter((f) => f.endsWith('.js')).length;
}

function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--help')) {
    process.stdout.write(
      'usage: npm run build [-- --no-check]\n\nType-checks the repository (skipped with --no-check, for a caller that just did),\nthen emits each published package into its dist/ in dependency order.\n',
    );
    process.exit(0);
  }
  const unknown = args.filter((a) => a !== '--no-check');
  if (unknown.length > 0) {
    process.stderr.write(`build: unknown argument ${unknown.join(' ')} (--help)\n`);
    process.exit(2);
  }
  if (args.includes('--no-check')) {
    process.stdout.write('build: type check skipped (--no-check)\n');
  } else {
    process.stdout.write('build: tsc --noEmit (type check of the repository)\n');
    try {
      execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit'], { cwd: ROOT, stdio: 'inherit' });
    } catch {
      process.stderr.write('build: type check failed; nothing emitted\n');
      process.exit(1);
    }
  }
  return (async () => {
    const order = await buildOrder();
    // Every dist/ goes first: a package must not compile against a sibling's stale dist/ that
    // this build has not emitted yet (a clean clone has none).
    for (const pkg of order) await rm(path.join(ROOT, pkg.dir, 'dist'), { recursive: true, force: true });
    for (const pkg of order) {
      const dir = path.join(ROOT, pkg.dir);
      try {
        execFileSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.build.json')], { cwd: dir, stdio: 'inherit' });
      } catch {
        process.stderr.write(`build: ${pkg.dir} did not compile against its dependencies' dist/\n`);
        process.exit(1);
      }
      for (const [from, to] of pkg.copy ?? []) await cp(path.join(dir, from), path.join(dir, to), { recursive: true });
      process.stdout.write(`build: ${pkg.dir}/dist (${await countFiles(path.join(dir, 'dist'))} JavaScript files, with .d.ts)\n`);
    }
    process.stdout.write('build: done\n');
  })();
}

void main().catch((error: unknown) => {
  process.stderr.write(`build: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
