/**
 * The repository's TypeScript transformed once into JavaScript, so that the processes a test
 * run starts (ingest, worker, the `oncehook` command: about 200 per run) load plain JavaScript
 * instead of going through tsx's loader, which costs each start about 1.2 s of CPU more
 * (measured in docs/testing.md). Built by the test run's global setup from the checkout it runs
 * in, so a mutant's scratch copy runs its mutated code; removed by its teardown.
 *
 * The tree mirrors the repository's layout (packages/, apps/, examples/, scripts/,
 * test/fixtures/) under `.test-build/<run>/`, inside the checkout so that third-party packages
 * resolve from its node_modules; its own node_modules links each workspace package to its
 * mirror, whose package.json points the `oncehook-source` condition at the `.js` files.
 * Files that are not TypeScript (migrations, the console's assets) are copied beside them, so
 * what a module finds by `import.meta.url` is there too.
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { transformSync } from 'esbuild';

/** The directories processes load code from (relative to the repository's root). */
const SOURCE_DIRS = ['packages', 'apps', 'examples', 'scripts', 'test/fixtures'];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.oncehook']);
/** The environment variable naming a built tree: set by the global setup, read by spawnService. */
export const COMPILED_TREE_VARIABLE = 'ONCEHOOK_TEST_COMPILED_TREE';

const isTypeScript = (file: string) => file.endsWith('.ts') && !file.endsWith('.d.ts');
/** `x.ts` -> `x.js`, for a file name or a package.json path. */
export const toJs = (file: string) => (isTypeScript(file) ? `${file.slice(0, -3)}.js` : file);

function mirrorDir(root: string, out: string, dir: string, packages: Map<string, string>): number {
  let count = 0;
  mkdirSync(path.join(out, dir), { recursive: true });
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const relative = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) count += mirrorDir(root, out, relative, packages);
      continue;
    }
    if (!entry.isFile()) continue;
    const source = path.join(root, relative);
    if (isTypeScript(entry.name)) {
      const { code } = transformSync(readFileSync(source, 'utf8'), { loader: 'ts', format: 'esm', target: 'node20', sourcefile: source, sourcemap: 'inline' });
      writeFileSync(path.join(out, toJs(relative)), code);
      count += 1;
    } else if (entry.name === 'package.json') {
      const manifest = JSON.parse(readFileSync(source, 'utf8')) as { name?: string; exports?: unknown; bin?: unknown; main?: unknown };
      const rewrite = (value: unknown): unknown =>
        typeof value === 'string' ? toJs(value) : value && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, rewrite(v)])) : value;
      writeFileSync(path.join(out, relative), JSON.stringify({ ...manifest, exports: rewrite(manifest.exports), bin: rewrite(manifest.bin), main: rewrite(manifest.main) }));
      if (manifest.name) packages.set(manifest.name, dir);
    } else {
      copyFileSync(source, path.join(out, relative));
    }
  }
  return count;
}

/**
 * Builds the tree for `root` in `root/.test-build/<name>` and returns its directory and how
 * many files were transformed. esbuild transforms file by file (no bundling, no type check:
 * `npm run typecheck` does that), which keeps every module where its imports expect it.
 */
export function buildCompiledTree(root: string, name: string): { dir: string; transformed: number } {
  const dir = path.join(root, '.test-build', name);
  sweepStaleTrees(path.dirname(dir));
  rmSync(dir, { recursive: true, force: true });
  const packages = new Map<string, string>();
  let transformed = 0;
  for (const sourceDir of SOURCE_DIRS) transformed += mirrorDir(root, dir, sourceDir, packages);
  for (const [name, packageDir] of packages) {
    const link = path.join(dir, 'node_modules', name);
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(path.join(dir, packageDir), link, 'dir');
  }
  return { dir, transformed };
}

/** Trees left by runs killed mid-way (SIGKILL: no exit hook ran), 6 hours on: no run lasts that long. */
function sweepStaleTrees(parent: string): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return; // no .test-build yet
  }
  for (const name of names) {
    const dir = path.join(parent, name);
    if (Date.now() - statSync(dir).mtimeMs > 6 * 3_600_000) rmSync(dir, { recursive: true, force: true });
  }
}

/** Removes a tree, and `.test-build/` with it when no other run's tree is left in it. */
export function removeCompiledTree(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  try {
    rmdirSync(path.dirname(dir));
  } catch {
    // Another run's tree is still there (ENOTEMPTY), or it is gone already.
  }
}
