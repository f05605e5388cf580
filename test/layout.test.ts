/**
 * The layout holds by test, not by habit (issue 22): each workspace package imports only what
 * its package.json declares (an undeclared import works here, through the workspace's hoisted
 * node_modules, and breaks in a user's install); no package imports an app; the engine's
 * packages form layers (the SDK a leaf; the engine never reaches up to the command); relative
 * imports stay inside their package; no import cycle between files of a package, of values or
 * of types (a type circle is a bag of dependencies passed around: STYLE.md 4). STYLE.md at the
 * repository's root is the habits the code follows; a citation of it names a habit it has.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { ROOT } from '@oncehook/harness';
import { describe, expect, it } from 'vitest';

interface Workspace {
  dir: string;
  name: string;
  declared: Set<string>;
  files: string[];
}

/**
 * Who may import whom among Oncehook's own packages (by package name), as each package's
 * README says it ("May import (of Oncehook's packages): `@oncehook/sdk`, ..." or "none"): the
 * README a newcomer reads and the rule the test holds are one table. The harness (test
 * support, never published) says "any" and is not held.
 */
const LAYERS: Record<string, string[]> = Object.fromEntries(
  readdirSync(path.join(ROOT, 'packages')).flatMap((dir) => {
    const { name } = JSON.parse(readFileSync(path.join(ROOT, 'packages', dir, 'package.json'), 'utf8')) as { name: string };
    const readme = readFileSync(path.join(ROOT, 'packages', dir, 'README.md'), 'utf8');
    if (/^May import: any package/m.test(readme)) return [];
    const line = /^May import \(of Oncehook's packages\): (.+)\.$/m.exec(readme);
    if (!line) throw new Error(`packages/${dir}/README.md has no "May import (of Oncehook's packages): ..." line`);
    return [[name, line[1] === 'none' ? [] : [...line[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)]];
  }),
);
const APPS = ['@oncehook/ingest', '@oncehook/worker', '@oncehook/sandbox-app'];

function sourceFiles(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => /\.(ts|mts)$/.test(f) && !f.endsWith('.d.ts') && !f.split(path.sep).includes('node_modules'))
    .map((f) => path.join(dir, f));
}

function workspace(dir: string): Workspace {
  const manifest = JSON.parse(readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8')) as Record<string, Record<string, string> | string>;
  const declared = new Set<string>();
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies'])
    for (const name of Object.keys((manifest[field] as Record<string, string>) ?? {})) declared.add(name);
  return { dir, name: manifest.name as string, declared, files: sourceFiles(path.join(ROOT, dir, 'src')) };
}

const WORKSPACES = [...readdirSync(path.join(ROOT, 'packages')).map((d) => `packages/${d}`), ...readdirSync(path.join(ROOT, 'apps')).map((d) => `apps/${d}`)].map(workspace);

interface Import {
  specifier: string;
  /** `import type` / `export type`: erased from the JavaScript. */
  typeOnly: boolean;
  /** `await import(...)`: loaded on demand, not part of a cycle at load time. */
  dynamic: boolean;
}

/** The imports of a file: static (`import`/`export ... from`, `import 'x'`) and dynamic. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');
  const found: Import[] = [];
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?'([^']+)'/gm)) {
    found.push({ specifier: m[3]!, typeOnly: Boolean(m[2]), dynamic: false });
  }
  for (const m of text.matchAll(/import\(\s*'([^']+)'\s*\)/g)) found.push({ specifier: m[1]!, typeOnly: false, dynamic: true });
  return found;
}

/** The package a bare specifier names: `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Every cycle a depth-first walk of `edges` closes (each as the files around it, first repeated last). */
function findCycles(edges: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): void => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'open') {
      cycles.push([...stack.slice(stack.indexOf(node)), node]);
      return;
    }
    state.set(node, 'open');
    stack.push(node);
    for (const next of edges.get(node) ?? []) visit(next);
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of edges.keys()) visit(node);
  return cycles;
}

const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));
const rel = (file: string) => path.relative(ROOT, file);

describe('the layout', () => {
  it('its own parts see what they look for: imports of every form, cycles', () => {
    const sample = path.join(ROOT, 'test/fixtures/layout-sample.ts.txt');
    expect(importsOf(sample)).toEqual([
      { specifier: 'node:fs', typeOnly: false, dynamic: false },
      { specifier: 'pg', typeOnly: true, dynamic: false },
      { specifier: './b.js', typeOnly: false, dynamic: false },
      { specifier: '@oncehook/sdk/stripe', typeOnly: false, dynamic: false },
      { specifier: './c.js', typeOnly: false, dynamic: false },
      { specifier: 'zod', typeOnly: false, dynamic: true },
    ]);
    expect(packageOf('@oncehook/sdk/stripe')).toBe('@oncehook/sdk');
    expect(packageOf('pino/file')).toBe('pino');
    expect(
      findCycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c', 'a']]);
    expect(
      findCycles(
        new Map([
          ['a', ['b']],
          ['b', []],
          ['c', ['b']],
        ]),
      ),
    ).toEqual([]);
  });

  it('finds the workspaces and their sources, and every package README states its layer', () => {
    expect(WORKSPACES.map((w) => w.name)).toEqual(expect.arrayContaining([...Object.keys(LAYERS), ...APPS]));
    // The layers the READMEs state (the command's production install carries no test support).
    // From the bottom: the handlers' API (sdk), the ground (shared), the providers, the engine
    // (core), then the processes and tools (oncehook: ingest, worker, the command; the test kit).
    expect(LAYERS).toEqual({
      '@oncehook/sdk': [],
      '@oncehook/shared': ['@oncehook/sdk'],
      '@oncehook/providers': ['@oncehook/sdk', '@oncehook/shared'],
      '@oncehook/core': ['@oncehook/sdk', '@oncehook/shared', '@oncehook/providers'],
      '@oncehook/testkit': ['@oncehook/sdk', '@oncehook/shared', '@oncehook/providers', '@oncehook/core'],
      oncehook: ['@oncehook/sdk', '@oncehook/shared', '@oncehook/providers', '@oncehook/core'],
      '@oncehook/sandbox': [],
    });
    for (const w of WORKSPACES) expect(w.files.length, w.dir).toBeGreaterThan(0);
  });

  it('every package imports only what its package.json declares (a type-only import: its @types package, or a devDependency)', () => {
    const problems: string[] = [];
    for (const w of WORKSPACES) {
      const manifest = JSON.parse(readFileSync(path.join(ROOT, w.dir, 'package.json'), 'utf8')) as { devDependencies?: Record<string, string> };
      const dev = new Set(Object.keys(manifest.devDependencies ?? {}));
      for (const file of w.files) {
        for (const i of importsOf(file)) {
          if (i.specifier.startsWith('.') || isBuiltin(i.specifier)) continue;
          const name = packageOf(i.specifier);
          if (name === w.name || w.declared.has(name)) continue;
          if (i.typeOnly && (dev.has(name) || w.declared.has(`@types/${name}`))) continue;
          problems.push(`${rel(file)} imports ${i.specifier}, which ${w.dir}/package.json does not declare`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('no package imports an app, and the engine packages import only the layers below them', () => {
    const problems: string[] = [];
    for (const w of WORKSPACES.filter((x) => x.dir.startsWith('packages/'))) {
      for (const file of w.files) {
        for (const i of importsOf(file)) {
          const name = packageOf(i.specifier);
          if (APPS.includes(name)) problems.push(`${rel(file)} imports the app ${name}`);
          const allowed = LAYERS[w.name];
          if (allowed && (name === 'oncehook' || name.startsWith('@oncehook/')) && name !== w.name && !allowed.includes(name)) {
            problems.push(`${rel(file)} (${w.name}) imports ${name}; ${w.name} may import ${allowed.join(', ') || 'none of Oncehook'}`);
          }
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('the published packages move together: one version, each other at ^that version, nothing private among their dependencies, scoped ones public', () => {
    const manifests = WORKSPACES.filter((w) => w.dir.startsWith('packages/')).map(
      (w) =>
        JSON.parse(readFileSync(path.join(ROOT, w.dir, 'package.json'), 'utf8')) as {
          name: string;
          version: string;
          private?: boolean;
          dependencies?: Record<string, string>;
          publishConfig?: { access?: string };
        },
    );
    const published = manifests.filter((m) => !m.private);
    const privateNames = new Set(manifests.filter((m) => m.private).map((m) => m.name));
    expect(published.map((m) => m.name).sort()).toEqual(['@oncehook/core', '@oncehook/providers', '@oncehook/sdk', '@oncehook/shared', '@oncehook/testkit', 'oncehook']);
    const version = published[0]!.version;
    const problems: string[] = [];
    for (const m of published) {
      if (m.version !== version) problems.push(`${m.name} is at ${m.version}, the others at ${version}`);
      if (m.name.startsWith('@') && m.publishConfig?.access !== 'public')
        problems.push(`${m.name} has no publishConfig.access "public" (npm publishes a scoped package restricted)`);
      for (const [dep, range] of Object.entries(m.dependencies ?? {})) {
        if (privateNames.has(dep)) problems.push(`${m.name} depends on the private ${dep}`);
        if (published.some((p) => p.name === dep) && range !== `^${version}`) problems.push(`${m.name} depends on ${dep}@${range}, not ^${version}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('relative imports stay inside their package', () => {
    const problems: string[] = [];
    for (const w of WORKSPACES) {
      const root = path.join(ROOT, w.dir);
      for (const file of w.files) {
        for (const i of importsOf(file)) {
          if (!i.specifier.startsWith('.')) continue;
          const target = path.resolve(path.dirname(file), i.specifier);
          if (!target.startsWith(`${root}${path.sep}`)) problems.push(`${rel(file)} imports ${i.specifier}, outside ${w.dir}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  /** The cycles among the files of each package, following the imports `follow` keeps. */
  const cyclesOf = (follow: (i: Import) => boolean): string[] => {
    const cycles: string[] = [];
    for (const w of WORKSPACES) {
      const edges = new Map<string, string[]>();
      for (const file of w.files) {
        const targets = importsOf(file)
          .filter((i) => i.specifier.startsWith('.') && follow(i))
          .map((i) => path.resolve(path.dirname(file), i.specifier).replace(/\.js$/, '.ts'));
        edges.set(file, targets);
      }
      cycles.push(...findCycles(edges).map((cycle) => cycle.map(rel).join(' -> ')));
    }
    return cycles;
  };

  it('no cycle of value imports between the files of a package', () => {
    expect(cyclesOf((i) => !i.typeOnly && !i.dynamic)).toEqual([]);
  });

  it('no cycle of type imports either (hand each module only what it uses)', () => {
    expect(cyclesOf(() => true)).toEqual([]);
  });

  it('STYLE.md is the repository\'s own: its examples are files here, and every "STYLE.md N" cited in the code names a habit it has', () => {
    const style = readFileSync(path.join(ROOT, 'STYLE.md'), 'utf8');
    const habits = new Set([...style.matchAll(/^(\d+)\. \*\*/gm)].map((m) => Number(m[1])));
    expect(habits.size).toBeGreaterThan(10);
    // Each example it gives is a file of this repository.
    const missing = [...style.matchAll(/`((?:packages|apps|test|scripts)\/[\w./-]+\.(?:ts|sql))`/g)]
      .map((m) => m[1]!)
      .filter((file) => !file.includes('*') && !/\/\d{4}_\*/.test(file))
      .filter((file) => {
        try {
          readFileSync(path.join(ROOT, file));
          return false;
        } catch {
          return true;
        }
      });
    expect(missing).toEqual([]);
    const citing = [...WORKSPACES.flatMap((w) => w.files), ...sourceFiles(path.join(ROOT, 'test')), ...sourceFiles(path.join(ROOT, 'scripts'))];
    const unknown = citing.flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/STYLE\.md (\d+)/g)]
        .map((m) => Number(m[1]))
        .filter((n) => !habits.has(n))
        .map((n) => `${path.relative(ROOT, file)}: STYLE.md ${n}`),
    );
    expect(unknown).toEqual([]);
  });
});
