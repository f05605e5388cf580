/**
 * The connection pool every process uses (packages/shared/src/db/pool.ts), against the real
 * failure: Postgres ends a connection while the process holds it checked out between
 * statements. pg's pool listens only on idle clients; without a listener of our own the
 * client's 'error' event is an uncaught exception that kills the process (it killed every
 * worker of a chaos run at its Postgres restart). Run as a process of its own, so that the
 * crash is the process's exit code.
 */
import { spawnSync } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { expect, it } from 'vitest';

it('a connection ended by the server while checked out between statements fails its next statement; the process lives and the pool serves the next transaction', () => {
  const child = spawnSync(process.execPath, [...SOURCE_NODE_ARGS, 'test/fixtures/pool-connection-ended.ts'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  expect(child.status, child.stderr).toBe(0);
  expect(child.stdout).toMatch(/^survived: rolled back \(.*(terminat|connection error).*\); next transaction: 1$/m);
});
