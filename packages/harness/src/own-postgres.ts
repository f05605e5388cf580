/**
 * A Postgres cluster of the test's own (pg_createcluster, trust auth, its own port), so a
 * test can stop and start the database under a running service. Never touches the shared
 * cluster on 5432.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { freePort } from './net.js';

const run = promisify(execFile);

export interface OwnPostgres {
  name: string;
  port: number;
  /** postgres://postgres@127.0.0.1:PORT (append /dbname). */
  baseUrl: string;
  start(): Promise<void>;
  /** Stops the server; mode immediate is the closest to a crash (no checkpoint, clients cut). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  destroy(): Promise<void>;
}

function pgVersion(): string {
  return process.env.TEST_PG_VERSION ?? '15';
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const name = `oncehook_${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const version = pgVersion();
  await run('pg_createcluster', [version, name, '--port', String(port), '--', '--auth-local=trust', '--auth-host=trust']);
  const cluster = {
    name,
    port,
    baseUrl: `postgres://postgres@127.0.0.1:${port}`,
    async start() {
      await run('pg_ctlcluster', [version, name, 'start']);
    },
    async stop(mode: 'fast' | 'immediate' = 'fast') {
      await run('pg_ctlcluster', [version, name, 'stop', '-m', mode]);
    },
    async destroy() {
      await run('pg_dropcluster', [version, name, '--stop']).catch(() => {});
    },
  };
  await cluster.start();
  return cluster;
}
