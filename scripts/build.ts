/**
 * `npm run build`: the JavaScript the Docker image runs.
 *
 * 1. Type-checks the whole repository with tsc (`tsc --noEmit`): a type error fails the build.
 * 2. Emits each package's JavaScript with esbuild into `<package>/dist/`: one ESM bundle per
 *    entry point, code shared between a package's entries split into chunks. Every import of a
 *    dependency or of another @oncehook package stays an import (`packages: 'external'`), so at
 *    run time each package exists once (one PermanentError class, one outbound observer) for the
 *    framework and for handler modules alike.
 * 3. Copies the SQL the migrations read next to the code that reads it.
 *
 * Each package exports its dist under the `oncehook-dist` condition, its TypeScript otherwise:
 * `node --conditions=oncehook-dist apps/ingest/dist/server.js` runs plain JavaScript; development,
 * tests and tsx keep running the sources. Why esbuild emits rather than tsc: the sources use
 * extensionless relative imports (moduleResolution "bundler"), which Node cannot load as they
 * are; tsc still decides whether the build passes.
 */
import { execFileSync } from 'node:child_process';
import { cp, rm } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';
import { ROOT } from './local-env';

interface PackageBuild {
  dir: string;
  /** Output name (without .js) -> source path relative to the package. */
  entries: Record<string, string>;
  /** Files or directories copied into dist after the build (source -> destination, relative to the package). */
  copy?: [string, string][];
}

export const BUILDS: PackageBuild[] = [
  {
    dir: 'packages/shared',
    entries: { index: 'src/index.ts', errors: 'src/errors.ts', json: 'src/json.ts', outbound: 'src/outbound/http-client.ts', 'migrate-cli': 'src/db/migrate-cli.ts' },
    // migrate.ts reads these next to itself (import.meta.url): in dist, next to its chunk.
    copy: [
      ['src/db/migrations', 'dist/migrations'],
      ['src/db/legacy', 'dist/legacy'],
      ['src/db/legacy-upgrade.sql', 'dist/legacy-upgrade.sql'],
    ],
  },
  { dir: 'packages/sdk', entries: { index: 'src/index.ts' } },
  // The admin pages read their script next to themselves (views.ts).
  { dir: 'apps/ingest', entries: { index: 'src/index.ts', server: 'src/server.ts' }, copy: [['src/admin/assets', 'dist/assets']] },
  { dir: 'apps/worker', entries: { index: 'src/index.ts', main: 'src/main.ts', 'oncehook-cli': 'src/oncehook-cli.ts' } },
  { dir: 'apps/sandbox', entries: { index: 'src/app.ts', server: 'src/server.ts' } },
  { dir: 'examples/shop', entries: { index: 'index.ts' } },
];

async function main(): Promise<void> {
  process.stdout.write('build: tsc --noEmit (type check)\n');
  try {
    execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--noEmit'], { cwd: ROOT, stdio: 'inherit' });
  } catch {
    process.stderr.write('build: type check failed; nothing emitted\n');
    process.exit(1);
  }
  for (const pkg of BUILDS) {
    const dir = path.join(ROOT, pkg.dir);
    await rm(path.join(dir, 'dist'), { recursive: true, force: true });
    const result = await build({
      absWorkingDir: dir,
      entryPoints: Object.fromEntries(Object.entries(pkg.entries).map(([out, src]) => [out, src])),
      outdir: 'dist',
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      sourcemap: 'linked',
      // Chunks beside the entries: code that finds files next to itself (migrate.ts) finds dist/.
      chunkNames: '[name]-[hash]',
      logLevel: 'warning',
      metafile: true,
    });
    for (const [from, to] of pkg.copy ?? []) await cp(path.join(dir, from), path.join(dir, to), { recursive: true });
    const files = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js')).length;
    process.stdout.write(`build: ${pkg.dir}/dist (${files} files)\n`);
  }
  process.stdout.write('build: done; run with node --conditions=oncehook-dist <package>/dist/<entry>.js\n');
}

void main().catch((error: unknown) => {
  process.stderr.write(`build: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
