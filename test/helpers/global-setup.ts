/**
 * Once per test run: build a migrated template database (Oncehook's schema, and the example
 * shop's tables: most tests run the example's handlers). Each test file clones it
 * (CREATE DATABASE ... TEMPLATE), which takes milliseconds and isolates files from each other.
 * The template's name is per run (handed to test files with provide/inject), so two runs on
 * one server (a developer's and `npm run mutants`) never drop each other's template.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { SHOP_MIGRATIONS } from '@oncehook/example-shop/src/handlers';
import { ADMIN_URL, urlFor } from '@oncehook/harness';
import { createPool } from '@oncehook/shared';
import { migrate } from '@oncehook/core';
import { detectTool, type SystemTool, type ToolStatus, toolsRequired } from './tools.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDb: string;
    /** Whether each system tool is there (tests that need a missing one skip; see tools.ts). */
    tools: Record<SystemTool, ToolStatus>;
  }
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Which tools are missing: named with what to install; a failure when CI requires them all. */
function checkTools(project: TestProject): void {
  const tools = { chromium: detectTool('chromium'), 'docker-compose': detectTool('docker-compose') };
  const missing = Object.entries(tools).filter(([, status]) => !status.available);
  if (missing.length > 0 && toolsRequired()) {
    throw new Error(`ONCEHOOK_CI is set and these tools are missing: ${missing.map(([name, s]) => `${name} (${s.install})`).join('; ')}. CI never skips a check.`);
  }
  for (const [name, status] of missing) {
    process.stderr.write(`\nSKIPPED: ${status.neededBy}: ${name} not found at ${status.path}; ${status.install} to run them.\n`);
  }
  project.provide('tools', tools);
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  checkTools(project);
  const name = `oncehook_tpl_${process.pid}_${randomBytes(3).toString('hex')}`;
  await admin(`CREATE DATABASE ${name}`);
  const pool = createPool(urlFor(name), { max: 1 });
  try {
    await migrate(pool, { sets: [{ name: 'shop', dir: SHOP_MIGRATIONS }] });
  } finally {
    await pool.end();
  }
  project.provide('templateDb', name);
  return async () => {
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  };
}
