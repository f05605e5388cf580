/**
 * Redis Cluster, for real (docs/scaling.md): a 3-primary, 3-replica cluster of the test's own
 * (harness: startOwnRedisCluster). Every process talks to it through REDIS_CLUSTER_NODES;
 * the one-node misconfiguration (REDIS_URL naming one node of the cluster, which used to
 * leave the other shards' events `received` with MOVED in the logs) is refused at start and
 * shown by readiness; a prefix that would cross slots is refused by the configuration. The
 * crash, chaos (with a primary killed and slots moved mid-run) and queue tests run a third
 * time on a cluster in the `redis-cluster` project (vitest.config.ts).
 */
import { spawn } from 'node:child_process';
import {
  deliver,
  paymentSucceeded,
  REDIS_URL,
  ROOT,
  nodeArgsFor,
  signStripe,
  spawnService,
  startOwnRedisCluster,
  waitFor,
  killAllServices,
  type OwnRedisCluster,
} from '@oncehook/harness';
import { ConfigError } from '@oncehook/sdk';
import { eventQueueNames, queueKey } from '@oncehook/core';
import { loadIngestConfig, loadWorkerConfig, parseClusterNodes, buildWorker } from 'oncehook';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ledgerSummary, startIngest, startWorker, stateCounts, testEnv, testLog, testPrefix } from './helpers/stack.js';

const SEEDS = 'redis://10.0.0.1:6379,redis://10.0.0.2:6379';

describe('the configuration of a cluster (no cluster needed)', () => {
  it('REDIS_CLUSTER_NODES is a list of redis:// or rediss:// nodes sharing scheme and credentials', () => {
    expect(parseClusterNodes('redis://10.0.0.1:6379, redis://10.0.0.2:6380')).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 6379 },
        { host: '10.0.0.2', port: 6380 },
      ],
      tls: false,
    });
    expect(parseClusterNodes('rediss://default:s%40cret@a.example:6379,rediss://default:s%40cret@b.example:6379')).toEqual({
      nodes: [
        { host: 'a.example', port: 6379 },
        { host: 'b.example', port: 6379 },
      ],
      tls: true,
      username: 'default',
      password: 's@cret',
    });
    const refusals: [string, RegExp][] = [
      ['10.0.0.1:6379', /"10.0.0.1:6379" must start with redis:\/\/ or rediss:\/\/ \(like redis:\/\/10.0.0.1:6379\)/],
      ['redis://[::1', /is not a URL: write each node as redis:\/\/host:port/],
      ['http://10.0.0.1:6379', /must start with redis:\/\//],
      ['redis://10.0.0.1', /needs a host and a port/],
      ['redis://10.0.0.1:6379/2', /a Redis Cluster has only database 0/],
      ['redis://10.0.0.1:6379,rediss://10.0.0.2:6379', /the same scheme .* and the same credentials/],
      ['redis://:a@10.0.0.1:6379,redis://:b@10.0.0.2:6379', /the same credentials/],
      [' , ', /names no node/],
    ];
    for (const [value, message] of refusals) expect(parseClusterNodes(value)).toMatch(message);
    // Through the configuration: one message naming the variable, the process does not start.
    expect(() => loadIngestConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:6379' })).toThrow(ConfigError);
    expect(() => loadWorkerConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:6379' })).toThrow(/REDIS_CLUSTER_NODES: "10.0.0.1:6379" must start with redis:\/\//);
    // Empty is unset: REDIS_URL is used.
    expect(loadWorkerConfig({ REDIS_CLUSTER_NODES: '' }).REDIS_CLUSTER_NODES).toBeUndefined();
  });

  it('a queue prefix that would spread one queue over slots, or put every shard in one, is refused, saying what to set', () => {
    // One shard, no hash tag: `oncehook:webhook-events:wait` and `...:active` hash apart (CROSSSLOT).
    expect(() => loadWorkerConfig({ REDIS_CLUSTER_NODES: SEEDS, QUEUE_PREFIX: 'oncehook' })).toThrow(
      /QUEUE_PREFIX: .*CROSSSLOT: wrap the prefix in braces \(QUEUE_PREFIX=\{oncehook\}\)/,
    );
    expect(() => loadIngestConfig({ REDIS_CLUSTER_NODES: SEEDS })).toThrow(/CROSSSLOT/);
    // Several shards under a braced prefix: the prefix is the tag of every key, one slot for all.
    expect(() => loadWorkerConfig({ REDIS_CLUSTER_NODES: SEEDS, QUEUE_PREFIX: '{oncehook}', QUEUE_SHARDS: '6' })).toThrow(
      /all 6 shards of QUEUE_SHARDS would land in one cluster slot, on one primary; drop the braces \(QUEUE_PREFIX=oncehook\)/,
    );
    // What works: a braced prefix with one shard; a plain prefix with several.
    expect(loadWorkerConfig({ REDIS_CLUSTER_NODES: SEEDS, QUEUE_PREFIX: '{oncehook}' }).QUEUE_PREFIX).toBe('{oncehook}');
    expect(loadWorkerConfig({ REDIS_CLUSTER_NODES: SEEDS, QUEUE_SHARDS: '6' }).REDIS_CLUSTER_NODES?.nodes).toHaveLength(2);
    // Without a cluster, nothing changes: one Redis has no slots.
    expect(loadWorkerConfig({ QUEUE_PREFIX: 'oncehook' }).QUEUE_PREFIX).toBe('oncehook');
    // On the Postgres queue, REDIS_CLUSTER_NODES is not used and not checked against the prefix.
    expect(loadWorkerConfig({ REDIS_CLUSTER_NODES: SEEDS, QUEUE_BACKEND: 'postgres' }).QUEUE_BACKEND).toBe('postgres');
  });
});

describe('on a real cluster (3 primaries, 3 replicas)', () => {
  let cluster: OwnRedisCluster;
  let db: TestDatabase;

  beforeAll(async () => {
    [cluster, db] = await Promise.all([startOwnRedisCluster(), createTestDatabase()]);
  }, 60_000);
  afterAll(async () => {
    await killAllServices();
    await db?.drop();
    await cluster?.stop();
  });

  it('REDIS_URL naming one node of the cluster is refused at start by ingest, the worker and `oncehook dev`, naming REDIS_CLUSTER_NODES', async () => {
    const oneNode = `redis://${cluster.nodes[0]!.address}`;
    const env = testEnv({ databaseUrl: db.url, prefix: testPrefix(), redisUrl: oneNode, extra: { QUEUE_SHARDS: '3', REDIS_CLUSTER_NODES: '' } });
    for (const kind of ['ingest', 'worker'] as const) {
      const service = spawnService(kind, env);
      const { code } = await service.exited;
      expect(code, service.lines.join('\n')).toBe(1);
      expect(service.lines.join('\n')).toMatch(/REDIS_URL names one node of a Redis Cluster .*Set REDIS_CLUSTER_NODES=/);
    }
    const dev = spawn(process.execPath, [...nodeArgsFor('packages/oncehook/src/cli/entry.ts'), 'dev', '--workers', '1'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db.url, REDIS_URL: oneNode, QUEUE_SHARDS: '3', QUEUE_PREFIX: testPrefix(), PORT: '0', METRICS_PORT: '0', ONCEHOOK_HANDLERS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    dev.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    dev.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const devCode = await new Promise<number | null>((resolve) => dev.on('close', resolve));
    expect(devCode, output).toBe(1);
    expect(output).toMatch(/oncehook dev: REDIS_URL names one node of a Redis Cluster/);
    expect(output).not.toMatch(/oncehook is up/);
  });

  it('REDIS_CLUSTER_NODES naming a Redis without cluster mode is refused at start, saying to use REDIS_URL', async () => {
    const service = spawnService('worker', testEnv({ databaseUrl: db.url, prefix: testPrefix(), extra: { REDIS_CLUSTER_NODES: REDIS_URL, QUEUE_SHARDS: '3' } }));
    const { code } = await service.exited;
    expect(code, service.lines.join('\n')).toBe(1);
    expect(service.lines.join('\n')).toMatch(/REDIS_CLUSTER_NODES names a Redis without cluster mode \(cluster_enabled:0\): unset REDIS_CLUSTER_NODES and set REDIS_URL/);
  });

  it("readiness writes to every shard's slot: one node as REDIS_URL is not ready (and says why), the cluster is", async () => {
    const prefix = testPrefix();
    const oneNode = await startIngest({ databaseUrl: db.url, prefix, redisUrl: `redis://${cluster.nodes[0]!.address}`, env: { QUEUE_SHARDS: '6', REDIS_CLUSTER_NODES: '' } });
    const onCluster = await startIngest({ databaseUrl: db.url, prefix, env: { QUEUE_SHARDS: '6', REDIS_CLUSTER_NODES: cluster.seeds } });
    const worker = await startWorker({ databaseUrl: db.url, prefix, env: { QUEUE_SHARDS: '6', REDIS_CLUSTER_NODES: cluster.seeds } });
    try {
      // The node answers PING: the old check said ready. A write to a shard it does not serve gets MOVED.
      const res = await fetch(`${oneNode.url}/readyz`);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        status: 'not_ready',
        checks: { postgres: 'ok', redis: 'unavailable' },
        problem: 'REDIS_URL names one node of a Redis Cluster: set REDIS_CLUSTER_NODES to the cluster nodes',
      });
      const ok = await fetch(`${onCluster.url}/readyz`);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });
      // The write landed in each shard's own slot, spread over more than one primary.
      const primaries = new Set<string>();
      for (const name of eventQueueNames(6)) primaries.add(await cluster.primaryOf(await cluster.slotOf(queueKey(prefix, name, 'oncehook-ready'))));
      expect(primaries.size).toBeGreaterThan(1);
    } finally {
      await Promise.all([oneNode.close(), onCluster.close(), worker.close()]);
    }
  });

  it('a worker answers /readyz on its metrics port: 503 on one node of the cluster (saying why), 200 on the cluster', async () => {
    const prefix = testPrefix();
    const build = (redisUrl: string, seeds: string) =>
      buildWorker(loadWorkerConfig(testEnv({ databaseUrl: db.url, prefix, redisUrl, extra: { QUEUE_SHARDS: '6', REDIS_CLUSTER_NODES: seeds } })), [], { log: testLog });
    const oneNode = build(`redis://${cluster.nodes[0]!.address}`, '');
    const onCluster = build(REDIS_URL, cluster.seeds);
    try {
      const [bad, good] = await Promise.all([oneNode.start({ reconciler: false }), onCluster.start({ reconciler: false })]);
      const res = await fetch(`http://127.0.0.1:${bad.metricsPort}/readyz`);
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ status: 'not_ready', checks: { redis: 'unavailable' }, problem: expect.stringMatching(/set REDIS_CLUSTER_NODES/) });
      const ok = await fetch(`http://127.0.0.1:${good.metricsPort}/readyz`);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok' } });
      // Liveness stays liveness: the process answers.
      expect((await fetch(`http://127.0.0.1:${bad.metricsPort}/healthz`)).status).toBe(200);
    } finally {
      await Promise.all([oneNode.close(), onCluster.close()]);
    }
  });

  it('events flow through 6 shards on the cluster: each done once, jobs on every shard', { timeout: 60_000 }, async () => {
    const prefix = testPrefix();
    const env = { QUEUE_SHARDS: '6', REDIS_CLUSTER_NODES: cluster.seeds };
    const ingest = await startIngest({ databaseUrl: db.url, prefix, env });
    const workers = await Promise.all([1, 2].map(() => startWorker({ databaseUrl: db.url, prefix, env })));
    try {
      const ids = Array.from({ length: 60 }, (_, n) => `evt_cluster_${n}`);
      for (const id of [...ids, ...ids]) {
        const res = await deliver(ingest.url, signStripe(paymentSucceeded(id, { account: 'acct_cluster', amount: 1 })));
        expect([200, 202]).toContain(res.status);
      }
      await waitFor(async () => (await stateCounts(db.pool)).done === 60, { timeoutMs: 30_000, what: 'all 60 events done' });
      const ledger = await ledgerSummary(db.pool);
      expect(ledger.entries).toBe(60);
      expect([...ledger.perEvent.values()].every((n) => n === 1)).toBe(true);
      for (const queue of ingest.queues.shards) expect((await queue.getJobCounts('completed')).completed, queue.name).toBeGreaterThan(0);
    } finally {
      await Promise.all([ingest.close(), ...workers.map((worker) => worker.close())]);
    }
  });
});
