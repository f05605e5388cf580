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
  // max_connections above the default 100: a chaos run at full load holds about 100 (two workers
  // on QUEUE_BACKEND=postgres with WORKER_CONCURRENCY=16 hold 37 each, ingest 15, the run's own
  // pools and the receiver the rest; docs/operating.md#postgres-connections), and a test must
  // fail on what the processes do, not on a default the server was never sized for.
  await run('pg_createcluster', [version, name, '--port', String(port), '-o', 'max_connections=300', '--', '--auth-local=trust', '--auth-host=trust']);
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
