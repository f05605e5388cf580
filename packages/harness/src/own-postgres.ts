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

/** A new cluster (pg_createcluster, trust auth), not started, and how to drive it. */
async function createCluster(version: string, name: string, port: number): Promise<OwnPostgres> {
  // max_connections above the default 100: a chaos run at full load holds about 100 (two workers
  // on QUEUE_BACKEND=postgres with WORKER_CONCURRENCY=16 hold 37 each, ingest 15, the run's own
  // pools and the receiver the rest; docs/operating.md#postgres-connections), and a test must
  // fail on what the processes do, not on a default the server was never sized for.
  await run('pg_createcluster', [version, name, '--port', String(port), '-o', 'max_connections=300', '--', '--auth-local=trust', '--auth-host=trust']);
  return {
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
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const name = `oncehook_${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const cluster = await createCluster(pgVersion(), name, port);
  await cluster.start();
  return cluster;
}

export interface OwnReplica extends OwnPostgres {
  /** pg_ctlcluster promote: the replica leaves recovery and takes writes. */
  promote(): Promise<void>;
}

/**
 * A streaming replica of `primary` (pg_basebackup -R into a cluster of its own), replicating
 * through `linkPort` (the primary's port, or a TcpProxy in front of it, so a test can stall
 * the link). `sync`: the primary waits for this replica's flush before a commit returns
 * (synchronous_standby_names = '*', synchronous_commit on); otherwise asynchronous (the
 * default of Postgres and of most managed offers' cross-zone replicas). Resolves once the
 * replica streams.
 */
export async function startOwnReplica(primary: OwnPostgres, options: { linkPort?: number; sync: boolean }): Promise<OwnReplica> {
  const version = pgVersion();
  const name = `oncehook_${randomBytes(4).toString('hex')}`;
  const port = await freePort();
  const cluster = await createCluster(version, name, port);
  const dataDir = `/var/lib/postgresql/${version}/${name}`;
  await run('sh', ['-c', `rm -rf '${dataDir}' && install -d -o postgres -g postgres -m 700 '${dataDir}'`]);
  // As the cluster's owner, so the files are its; -R writes standby.signal and primary_conninfo.
  await run('runuser', [
    '-u',
    'postgres',
    '--',
    'pg_basebackup',
    '-h',
    '127.0.0.1',
    '-p',
    String(options.linkPort ?? primary.port),
    '-U',
    'postgres',
    '-D',
    dataDir,
    '-X',
    'stream',
    '-R',
    '--checkpoint=fast',
  ]);
  const sql = (p: number, statement: string) => run('psql', ['-h', '127.0.0.1', '-p', String(p), '-U', 'postgres', '-d', 'postgres', '-Atc', statement]);
  await sql(primary.port, `ALTER SYSTEM SET synchronous_standby_names = '${options.sync ? '*' : ''}'`);
  await sql(primary.port, 'SELECT pg_reload_conf()');
  const replica: OwnReplica = {
    ...cluster,
    async promote() {
      await run('pg_ctlcluster', [version, name, 'promote']);
    },
  };
  await replica.start();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { stdout } = await sql(primary.port, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'${options.sync ? " AND sync_state = 'sync'" : ''}`);
    if (Number(stdout.trim()) > 0) break;
    if (Date.now() > deadline) throw new Error(`replica ${name} (port ${port}) is not streaming from port ${primary.port} after 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return replica;
}
