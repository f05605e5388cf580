#!/usr/bin/env node
// The `oncehook` command (npx oncehook --help). An installed package runs its compiled copy
// (dist/cli/entry.js). A checkout of Oncehook's own repository that was not built runs the
// sources instead: the same command again, through tsx, asking for the packages' sources.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const compiled = new URL('../dist/cli/entry.js', import.meta.url);
if (existsSync(fileURLToPath(compiled))) {
  await import(compiled.href);
} else {
  const sources = fileURLToPath(new URL('../src/cli/entry.ts', import.meta.url));
  // tsx from this checkout (resolved from here, not from the working directory).
  const tsx = import.meta.resolve('tsx');
  const run = spawnSync(process.execPath, ['--conditions=oncehook-source', '--import', tsx, sources, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
