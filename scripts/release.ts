/**
 * `npm run release [-- --out DIR] [--no-check]`: what a team installs with Node alone, before
 * (and beside) the npm registry (docs/use-in-your-project.md, "1. Install").
 *
 * 1. Builds every package (`npm run build`: the type check unless --no-check, then dist/).
 * 2. Packs them, and writes to DIR (default `release/`) the three a project installs:
 *    - `oncehook-<v>.tgz`: the command, with the engine (`@oncehook/core`), the providers
 *      (`@oncehook/providers`) and the ground they stand on (`@oncehook/shared`) bundled inside
 *      it (`bundleDependencies`): they are its
 *      implementation, never imported by a project, so nothing of ours is fetched from a
 *      registry when it installs;
 *    - `oncehook-sdk-<v>.tgz`: what handlers import; one copy in a project, which the command
 *      and the test kit use too (npm dedupes them onto it);
 *    - `oncehook-testkit-<v>.tgz`: the test kit (a dev dependency), the engine bundled likewise.
 * 3. Prints them and the two install lines.
 *
 * `npm install <DIR>/oncehook-<v>.tgz <DIR>/oncehook-sdk-<v>.tgz` in an empty folder works with
 * the `@oncehook` scope's registry unreachable (test/user-project.test.ts installs exactly so).
 * Published to a registry, the same three packages read `npm install oncehook @oncehook/sdk`.
 */
import { execFileSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseScriptArgs, ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';

/** The packages a project installs, and the internal ones each carries inside it. */
const RELEASED: { dir: string; bundles: string[] }[] = [
  { dir: 'packages/oncehook', bundles: ['core', 'providers', 'shared'] },
  { dir: 'packages/sdk', bundles: [] },
  { dir: 'packages/testkit', bundles: ['core', 'providers', 'shared'] },
];

interface Manifest {
  dependencies?: Record<string, unknown>;
  peerDependencies?: Record<string, unknown>;
  peerDependenciesMeta?: Record<string, unknown>;
  bundleDependencies?: string[];
}

const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

/** `npm pack` of a folder into `into`; returns the tarball's path. */
function pack(dir: string, into: string): string {
  const name = npm(['pack', '--pack-destination', into, '--silent', '--ignore-scripts'], dir).split('\n').pop()!;
  return path.join(into, name);
}

async function main(): Promise<void> {
  const { values } = parseScriptArgs(import.meta.url, { options: { out: { type: 'string', default: 'release' }, 'no-check': { type: 'boolean' } } });
  const out = path.resolve(ROOT, values.out);
  execFileSync(process.execPath, [...SOURCE_NODE_ARGS, 'scripts/build.ts', ...(values['no-check'] ? ['--no-check'] : [])], { cwd: ROOT, stdio: 'inherit' });

  const work = await mkdtemp(path.join(tmpdir(), 'oncehook-release-'));
  try {
    // Every package as `npm pack` makes it (its `files`, its compiled dist/), unpacked.
    const unpacked = new Map<string, string>();
    for (const name of ['sdk', 'shared', 'providers', 'core', 'oncehook', 'testkit']) {
      const tarball = pack(path.join(ROOT, 'packages', name), work);
      const into = path.join(work, 'unpacked', name);
      await mkdir(into, { recursive: true });
      execFileSync('tar', ['xzf', tarball, '-C', into, '--strip-components=1']);
      unpacked.set(name, into);
    }
    await rm(out, { recursive: true, force: true });
    await mkdir(out, { recursive: true });
    const produced: string[] = [];
    for (const { dir, bundles } of RELEASED) {
      const name = path.basename(dir);
      const staged = unpacked.get(name)!;
      if (bundles.length > 0) {
        for (const bundled of bundles) await cp(unpacked.get(bundled)!, path.join(staged, 'node_modules/@oncehook', bundled), { recursive: true });
        const manifestPath = path.join(staged, 'package.json');
        const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as Manifest;
        // npm installs a bundled package's files, not its dependencies: the bundling package
        // declares them (the engine's bullmq, the ground's pino, undici, ...), and its peers.
        for (const bundled of bundles) {
          const inner = JSON.parse(await readFile(path.join(unpacked.get(bundled)!, 'package.json'), 'utf8')) as Manifest;
          for (const field of ['dependencies', 'peerDependencies', 'peerDependenciesMeta'] as const) {
            for (const [name, spec] of Object.entries(inner[field] ?? {})) {
              if (field === 'dependencies' && name.startsWith('@oncehook/') && name !== '@oncehook/sdk') continue;
              manifest[field] = { ...manifest[field], [name]: manifest[field]?.[name] ?? spec };
            }
          }
        }
        manifest.bundleDependencies = bundles.map((b) => `@oncehook/${b}`);
        await writeFile(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
      }
      produced.push(pack(staged, out));
    }
    process.stdout.write(`release: wrote ${out}\n`);
    for (const file of produced) process.stdout.write(`  ${path.basename(file)}  ${((await stat(file)).size / 1024).toFixed(0)} KiB\n`);
    const [command, sdk, testkit] = produced.map((file) => path.relative(process.cwd(), file) || file);
    process.stdout.write(`install in a project of yours (docs/use-in-your-project.md):\n  npm install ${command} ${sdk} zod\n  npm install -D ${testkit}\n`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`release failed: ${(error as Error).message}\n`);
  process.exit(1);
});
