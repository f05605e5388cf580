/**
 * A Redis Cluster of the test's own: 3 primaries and 3 replicas (one each) on free local
 * ports, without persistence, in a temporary directory removed by `stop()`. Built from
 * Debian's redis-server (`--cluster-enabled yes`) and `redis-cli --cluster create`, as a team
 * would build a self-hosted one. Never touches the shared Redis on 6379.
 *
 * Failover (`killPrimary`) and resharding (`moveSlots`) are the real operations: kill -9 of a
 * primary, after which its replica is promoted by the cluster's own vote; `redis-cli --cluster
 * reshard`, which migrates keys slot by slot while clients get MOVED and ASK redirections.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from './net.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);

/**
 * How long a node may be unreachable before the cluster fails it over. Redis' default is 15 s;
 * 2 s keeps a failover within a test's patience (a promotion follows in about 2-4 s).
 */
const NODE_TIMEOUT_MS = 2_000;

export interface ClusterNode {
  port: number;
  /** host:port, as REDIS_CLUSTER_NODES takes it. */
  address: string;
}

export interface OwnRedisCluster {
  nodes: readonly ClusterNode[];
  /** REDIS_CLUSTER_NODES for the processes under test: every node's `redis://host:port`. */
  seeds: string;
  /** The address of the primary that serves `slot` now. */
  primaryOf(slot: number): Promise<string>;
  /**
   * kill -9 the primary serving `slot`, wait until its replica took over and every slot is
   * served again. Writes the dead primary had not yet replicated are lost, as in production.
   * Returns the address of the killed node.
   */
  killPrimary(slot?: number): Promise<string>;
  /** Moves these slots, with their keys, to the primary at `to` while clients keep working (MOVED, ASK). */
  moveSlots(slots: readonly number[], to: string): Promise<void>;
  /** The slot of a key (CLUSTER KEYSLOT). */
  slotOf(key: string): Promise<number>;
  /** The primaries alive now (address). */
  primaries(): Promise<string[]>;
  stop(): Promise<void>;
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await freePort();
    if (port + 10_000 > 65_535 || taken.has(port) || taken.has(port + 10_000)) continue;
    if (await portIsFree(port + 10_000)) return port;
  }
  throw new Error('no free port pair (port and port + 10000) for a cluster node');
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.on('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function client(address: string): Redis {
  const [host, port] = address.split(':');
  const redis = new Redis({ host, port: Number(port), lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2_000 });
  redis.on('error', () => {});
  return redis;
}

async function ask<T>(address: string, command: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = client(address);
  try {
    await redis.connect();
    return await command(redis);
  } finally {
    redis.disconnect();
  }
}

interface SlotRange {
  from: number;
  to: number;
  primary: string;
}

async function slotRanges(address: string): Promise<SlotRange[]> {
  const reply = (await ask(address, (redis) => redis.call('CLUSTER', 'SLOTS'))) as [number, number, [string, number, string]][];
  return reply.map(([from, to, primary]) => ({ from, to, primary: `${primary[0] === '' ? '127.0.0.1' : primary[0]}:${primary[1]}` }));
}

async function nodeId(address: string): Promise<string> {
  return (await ask(address, (redis) => redis.call('CLUSTER', 'MYID'))) as string;
}

export async function startOwnRedisCluster(options: { primaries?: number } = {}): Promise<OwnRedisCluster> {
  const primaryCount = options.primaries ?? 3;
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-cluster-'));
  const taken = new Set<number>();
  const nodes: ClusterNode[] = [];
  for (let i = 0; i < primaryCount * 2; i++) {
    const port = await freeClusterPort(taken);
    taken.add(port);
    taken.add(port + 10_000);
    nodes.push({ port, address: `127.0.0.1:${port}` });
  }
  const processes = new Map<string, ChildProcess>();
  const dead = new Set<string>();

  for (const node of nodes) {
    const proc = spawn(
      'redis-server',
      [
        '--port',
        String(node.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${node.port}.conf`,
        '--cluster-node-timeout',
        String(NODE_TIMEOUT_MS),
        '--dir',
        dir,
        // A replica's first sync starts at once (Redis waits 5 s for more replicas by default).
        '--repl-diskless-sync-delay',
        '0',
        '--logfile',
        `redis-${node.port}.log`,
      ],
      { stdio: 'ignore' },
    );
    processes.set(node.address, proc);
  }

  async function alive(): Promise<string[]> {
    return nodes.map((node) => node.address).filter((address) => !dead.has(address));
  }

  /** Every live node sees the cluster ok, with all 16384 slots served by live primaries. */
  async function settled(): Promise<boolean> {
    for (const address of await alive()) {
      try {
        const info = (await ask(address, (redis) => redis.call('CLUSTER', 'INFO'))) as string;
        if (!info.includes('cluster_state:ok')) return false;
        const ranges = await slotRanges(address);
        const served = ranges.reduce((sum, range) => sum + range.to - range.from + 1, 0);
        if (served !== 16_384 || ranges.some((range) => dead.has(range.primary))) return false;
        // A replica that has not synced yet cannot take over from its primary.
        const replication = (await ask(address, (redis) => redis.info('replication'))) as string;
        if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return false;
      } catch {
        return false;
      }
    }
    return true;
  }

  async function stop() {
    await Promise.all(
      [...processes.values()].map(
        (proc) =>
          new Promise<void>((resolve) => {
            if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
            proc.once('exit', () => resolve());
            proc.kill('SIGKILL');
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  }

  try {
    for (const node of nodes) {
      await waitFor(() => ask(node.address, async (redis) => (await redis.ping()) === 'PONG').catch(() => false), { timeoutMs: 10_000, what: `redis-server on ${node.port}` });
    }
    await run('redis-cli', ['--cluster', 'create', ...nodes.map((node) => node.address), '--cluster-replicas', '1', '--cluster-yes'], { timeout: 30_000 });
    await waitFor(settled, { timeoutMs: 30_000, what: 'the cluster to be ok on every node' });
  } catch (error) {
    await stop();
    throw error;
  }

  async function primaryOf(slot: number): Promise<string> {
    const [first] = await alive();
    const range = (await slotRanges(first!)).find((candidate) => candidate.from <= slot && slot <= candidate.to);
    if (!range) throw new Error(`no primary serves slot ${slot}`);
    return range.primary;
  }

  async function primaries(): Promise<string[]> {
    const [first] = await alive();
    return [...new Set((await slotRanges(first!)).map((range) => range.primary))];
  }

  async function killPrimary(slot = 0): Promise<string> {
    const victim = await primaryOf(slot);
    const proc = processes.get(victim)!;
    const gone = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGKILL');
    await gone;
    dead.add(victim);
    await waitFor(settled, { timeoutMs: 30_000, what: `a replica to take over from ${victim}` });
    return victim;
  }

  /**
   * Resharding, as `redis-cli --cluster reshard` does it, slot by slot: the target IMPORTING,
   * the source MIGRATING (clients asking the source for a key already moved get ASK), the
   * keys moved with MIGRATE in batches (a script over keys half-moved gets TRYAGAIN), then
   * every primary told the slot's new owner (clients get MOVED from then on).
   */
  async function moveSlots(slots: readonly number[], to: string): Promise<void> {
    const toId = await nodeId(to);
    const [toHost, toPort] = to.split(':');
    for (const slot of slots) {
      const from = await primaryOf(slot);
      if (from === to) continue;
      const fromId = await nodeId(from);
      await ask(to, (redis) => redis.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId));
      await ask(from, (redis) => redis.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId));
      await ask(from, async (redis) => {
        for (;;) {
          const keys = (await redis.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
          if (keys.length === 0) break;
          await redis.call('MIGRATE', toHost!, toPort!, '', 0, 5_000, 'REPLACE', 'KEYS', ...keys);
        }
      });
      for (const primary of await primaries()) await ask(primary, (redis) => redis.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId));
      await ask(from, (redis) => redis.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId));
    }
    await waitFor(settled, { timeoutMs: 30_000, what: 'the cluster to settle after the reshard' });
  }

  async function slotOf(key: string): Promise<number> {
    const [first] = await alive();
    return (await ask(first!, (redis) => redis.call('CLUSTER', 'KEYSLOT', key))) as number;
  }

  return { nodes, seeds: nodes.map((node) => `redis://${node.address}`).join(','), primaryOf, killPrimary, moveSlots, slotOf, primaries, stop };
}
