/**
 * A test run killed mid-way leaves no process running: everything started from the sources
 * (SOURCE_NODE_ARGS) stops itself once orphaned (packages/harness/src/exit-with-parent.mjs).
 * The real case: SIGKILL of a parent that started a service, as when vitest is killed.
 */
import { spawn } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS, waitFor } from '@oncehook/harness';
import { expect, it } from 'vitest';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('a process started from the sources stops once its parent is SIGKILLed (first SIGTERM: its own clean stop)', async () => {
  // The parent starts a child that would run for ever, with a SIGTERM handler that says so.
  const childScript = "process.on('SIGTERM', () => { console.log('clean stop'); process.exit(0); }); setInterval(() => {}, 1000); console.log('ready');";
  const parentScript = `
    const { spawn } = require('node:child_process');
    const child = spawn(process.execPath, [...JSON.parse(process.argv[1]), '-e', ${JSON.stringify(childScript)}], { cwd: ${JSON.stringify(ROOT)}, stdio: ['ignore', 'inherit', 'inherit'] });
    console.log('child ' + child.pid);
    setInterval(() => {}, 1000);`;
  const parent = spawn(process.execPath, ['-e', parentScript, JSON.stringify(SOURCE_NODE_ARGS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  parent.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  await waitFor(async () => (/ready/.test(out) ? true : null), { timeoutMs: 30_000, what: 'the child started' });
  const childPid = Number(/child (\d+)/.exec(out)?.[1]);
  expect(alive(childPid)).toBe(true);

  parent.kill('SIGKILL');
  await waitFor(async () => (alive(childPid) ? null : true), { timeoutMs: 20_000, what: 'the orphaned child stopped' });
  // Nothing else ends that process: without exit-with-parent.mjs it runs on (this test then
  // times out above, as it did when the --import was taken out).
  expect(alive(childPid)).toBe(false);
}, 60_000);
