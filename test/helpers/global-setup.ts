/**
 * Once per test run: build a migrated template database (Oncehook's schema, and the example
 * shop's tables: most tests run the example's handlers). Each test file clones it
 * (CREATE DATABASE ... TEMPLATE), which takes milliseconds and isolates files from each other.
 * The template's name is per run (handed to test files with provide/inject), so two runs on
 * one server (a developer's and `npm run mutants`) never drop each other's template.
 */
import type { TestProject } from 'vitest/node';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { buildCompiledTree, COMPILED_TREE_VARIABLE, createScratchDatabase, removeCompiledTree, ROOT, withAdmin } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';
import { TEST_DATABASE_PREFIXES, testDatabaseName } from './test-database-names.js';
import { detectTool, type SystemTool, type ToolStatus, toolsRequired } from './tools.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDb: string;
    /** Whether each system tool is there (tests that need a missing one skip; see tools.ts). */
    tools: Record<SystemTool, ToolStatus>;
  }
}

/** Which tools are missing: named with what to install; a failure when CI requires them all. */
function checkTools(project: TestProject): void {
  const tools = { chromium: detectTool('chromium'), 'docker-compose': detectTool('docker-compose'), spin: detectTool('spin') };
  const missing = Object.entries(tools).filter(([, status]) => !status.available);
  if (missing.length > 0 && toolsRequired()) {
    throw new Error(`ONCEHOOK_CI is set and these tools are missing: ${missing.map(([name, s]) => `${name} (${s.install})`).join('; ')}. CI never skips a check.`);
  }
  for (const [name, status] of missing) {
    process.stderr.write(`\nSKIPPED: ${status.neededBy}: ${name} not found at ${status.path}; ${status.install} to run them.\n`);
  }
  project.provide('tools', tools);
}

/**
 * A run killed mid-way (SIGKILL of vitest: its afterAll hooks and this file's teardown never
 * run) leaves its template and test databases. They fail nothing (every name is random), but
 * they would pile up on a developer's server: the suite's databases older than STALE_AFTER_HOURS
 * (no run lasts that long; a run of the mutants is a series of short runs) are dropped here.
 */
const STALE_AFTER_HOURS = 6;

async function sweepStaleDatabases(): Promise<void> {
  await withAdmin(async (client) => {
    const { rows } = await client.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE starts_with(datname, 'oncehook_')`);
    const now = Date.now() / 1000;
    for (const { datname } of rows) {
      const prefix = TEST_DATABASE_PREFIXES.find((p) => datname.startsWith(p));
      const created = prefix ? /^([0-9a-z]+)_[0-9a-f]{12}$/.exec(datname.slice(prefix.length)) : null;
      if (!created || now - Number.parseInt(created[1]!, 36) < STALE_AFTER_HOURS * 3_600) continue;
      await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      process.stderr.write(`test setup: dropped ${datname}, left by a test run killed ${STALE_AFTER_HOURS}+ hours ago\n`);
    }
  });
}

/**
 * The processes tests start run from JavaScript transformed once per run (compiled-tree.ts);
 * the test workers, and what they start, inherit the variable. Once per vitest process (this
 * setup runs once per project, in one process), removed when that process exits. Not in watch
 * mode (`npm run test:watch`): a tree built at its start would run the sources as they were
 * then, so there the processes load the sources through tsx, as edited.
 */
function useCompiledTree(project: TestProject, name: string): void {
  const once = Symbol.for('oncehook.compiledTree');
  const state = globalThis as { [once]?: string };
  if (state[once] || project.vitest.config.watch) return;
  const tree = buildCompiledTree(ROOT, name);
  state[once] = tree.dir;
  process.env[COMPILED_TREE_VARIABLE] = tree.dir;
  process.on('exit', () => removeCompiledTree(tree.dir));
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  checkTools(project);
  await sweepStaleDatabases();
  const template = await createScratchDatabase({ name: testDatabaseName('oncehook_tpl_') });
  const pool = createPool(template.url, { max: 1 });
  try {
    await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  } finally {
    await pool.end();
  }
  project.provide('templateDb', template.name);
  useCompiledTree(project, template.name);
  return () => template.drop();
}
