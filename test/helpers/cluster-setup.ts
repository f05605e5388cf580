/**
 * The redis-cluster project's global setup (vitest.config.ts): one Redis Cluster of the run's
 * own (3 primaries, 3 replicas on free ports; harness startOwnRedisCluster), handed to the
 * test files as `redisClusterNodes` (REDIS_CLUSTER_NODES; test/helpers/stack.ts) and removed
 * when the project ends. Tests that kill a primary start a cluster of their own (the chaos).
 */
import type { TestProject } from 'vitest/node';
import { startOwnRedisCluster } from '@oncehook/harness';

declare module 'vitest' {
  export interface ProvidedContext {
    /** REDIS_CLUSTER_NODES of the project's cluster (only on the redis-cluster project). */
    redisClusterNodes: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startOwnRedisCluster();
  project.provide('redisClusterNodes', cluster.seeds);
  return () => cluster.stop();
}
