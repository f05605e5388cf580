/**
 * `npm test` on a machine without Chromium or docker-compose: the checks that need them are
 * skipped and the run names them with what to install; with ONCEHOOK_CI=1 (what .ci/run sets)
 * the same run fails instead: CI never skips. Run for real: a nested vitest run of the compose
 * checks with both tools pointed at paths that do not exist.
 */
import { spawn } from 'node:child_process';
import { ROOT } from '@oncehook/harness';
import { expect, it } from 'vitest';

function nestedRun(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', 'test/compose.test.ts'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? '/tmp',
        CHROMIUM_PATH: '/nonexistent/chromium',
        DOCKER_COMPOSE_PATH: '/nonexistent/docker-compose',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.on('close', (code) => resolve({ code, output }));
  });
}

it('without the tools: passes, naming what it skipped and what to install; with ONCEHOOK_CI=1: fails', async () => {
  const relaxed = await nestedRun({});
  expect(relaxed.code, relaxed.output).toBe(0);
  expect(relaxed.output).toContain(
    'SKIPPED: the compose file checks (test/compose.test.ts): docker-compose not found at /nonexistent/docker-compose; apt-get install docker-compose',
  );
  expect(relaxed.output).toContain('SKIPPED: the admin browser tests');
  expect(relaxed.output).toMatch(/chromium not found at \/nonexistent\/chromium; apt-get install chromium/);
  // Every check of compose.test.ts needs docker-compose except the Dockerfile's: all of them skipped, none failed.
  expect(relaxed.output).toMatch(/[1-9]\d* skipped/);
  expect(relaxed.output).not.toMatch(/\d+ failed/);

  const strict = await nestedRun({ ONCEHOOK_CI: '1' });
  expect(strict.code).not.toBe(0);
  expect(strict.output).toContain('ONCEHOOK_CI is set and these tools are missing: chromium (apt-get install chromium (or set CHROMIUM_PATH)); docker-compose');
}, 120_000);
