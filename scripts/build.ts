/**
 * `npm run build`: the packages a registry can serve, and the JavaScript the image runs.
 *
 * 1. Type-checks the whole repository with tsc (`tsc --noEmit`, sources through the
 *    oncehook-source condition): a type error anywhere fails the build.
 * 2. Emits each published package with tsc, in dependency order (sdk, shared, core, oncehook,
 *    testkit): `<package>/dist/` gets its JavaScript, its `.d.ts` (with declaration maps) and
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
import { cp, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';

interface PackageBuild {
  dir: string;
  /** Files or directories copied into dist after the emit (source -> destination, relative to the package). */
  copy?: [string, string][];
}

/** The published packages, each after the packages it depends on. */
export const BUILDS: PackageBuild[] = [
  { dir: 'packages/sdk' },
  { dir: 'packages/shared' },
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

const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');

async function countFiles(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true });
  return entries.filter((f) => f.endsWith('.js')).length;
}

function main(): Promise<void> {
  process.stdout.write('build: tsc --noEmit (type check of the repository)\n');
  try {
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit'], { cwd: ROOT, stdio: 'inherit' });
  } catch {
    process.stderr.write('build: type check failed; nothing emitted\n');
    process.exit(1);
  }
  return (async () => {
    for (const pkg of BUILDS) {
      const dir = path.join(ROOT, pkg.dir);
      await rm(path.join(dir, 'dist'), { recursive: true, force: true });
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
