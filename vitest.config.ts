import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * Longest first (LPT scheduling): three files at a time on two cores, a file of minutes started
 * last would run alone at the end while the other slots idle. A clean clone (CI) has no timing
 * cache, and vitest's default then starts the largest files first, which are not the longest.
 * The seconds are one clean `bash .ci/run` on this machine (2026-12-07, with the processes
 * compiled; its default reporter's figure for each file), by project: they only order the start, a wrong figure costs time, never a
 * result. Files not listed (seconds each) follow in vitest's order.
 */
const EXPECTED_SECONDS: Record<string, number> = {
  'suite:test/user-project.test.ts': 155,
  'suite:test/first-minutes.test.ts': 83,
  'suite:test/bench-smoke.test.ts': 76,
  // Spin's verifier, single-threaded: started last, it once ran 35 s alone at the end of the group.
  'suite:test/protocol-model.test.ts': 66,
  'suite:test/flow-control.test.ts': 64,
  'suite:test/backfill.test.ts': 48,
  'postgres-queue:test/chaos-smoke.test.ts': 47,
  'suite:test/soak-smoke.test.ts': 45,
  'redis-cluster:test/chaos-smoke.test.ts': 44,
  'suite:test/postgres-failover.test.ts': 33,
  'suite:test/chaos-smoke.test.ts': 29,
  'suite:test/testkit.test.ts': 27,
  'postgres-queue:test/postgres-outage.test.ts': 24,
  'suite:test/tools.test.ts': 23,
  'suite:test/postgres-outage.test.ts': 22,
  'suite:test/providers.test.ts': 20,
  'redis-cluster:test/crash-recovery.test.ts': 20,
  'suite:test/destinations.test.ts': 19,
  'suite:test/crash-recovery.test.ts': 19,
  'suite:test/bench-tools-smoke.test.ts': 19,
  'postgres-queue:test/crash-recovery.test.ts': 18,
  'suite:test/script-help.test.ts': 17,
  'suite:test/redis-cluster.test.ts': 12,
  'suite:test/flow-control-engine.test.ts': 12,
  'suite:test/dependency-loss.test.ts': 11,
  'suite:test/demo.test.ts': 11,
  'suite:test/startup-checks.test.ts': 10,
  'suite:test/retention.test.ts': 10,
  'suite:test/migrations.test.ts': 10,
  'suite:test/metrics.test.ts': 10,
  'suite:test/hardening.test.ts': 10,
  'suite:test/dev-embedded.test.ts': 9,
  'suite:test/bench-scripts-smoke.test.ts': 17,
};

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const expected = (spec: TestSpecification) => EXPECTED_SECONDS[`${spec.project.name}:${path.relative(spec.project.config.root, spec.moduleId)}`] ?? 0;
    // Stable: the listed files by their seconds, longest first, then the rest in vitest's order.
    return sorted
      .map((spec, i) => ({ spec, i, seconds: expected(spec) }))
      .sort((a, b) => b.seconds - a.seconds || a.i - b.i)
      .map(({ spec }) => spec);
  }
}

/** Run a second time with QUEUE_BACKEND=postgres (test/helpers/stack.ts, TEST_QUEUE_BACKEND). */
const POSTGRES_QUEUE_FILES = [
  'test/crash-recovery.test.ts',
  'test/effects-crash.test.ts',
  'test/tracing-crash.test.ts',
  'test/chaos-smoke.test.ts',
  'test/concurrent-duplicates.test.ts',
  'test/fan-out.test.ts',
  'test/operations.test.ts',
  'test/admin.test.ts',
  'test/postgres-outage.test.ts',
];

/**
 * Run a third time on a Redis Cluster (3 primaries, 3 replicas, QUEUE_SHARDS=6; the chaos
 * smoke on a cluster of its own with a primary killed and shard slots moved mid-run).
 */
const REDIS_CLUSTER_FILES = [
  'test/crash-recovery.test.ts',
  'test/effects-crash.test.ts',
  'test/chaos-smoke.test.ts',
  'test/concurrent-duplicates.test.ts',
  'test/fan-out.test.ts',
  'test/queue-shards.test.ts',
];

/**
 * Two groups of test files. The first: the suite, then the queue-facing tests again with the
 * queue in Postgres and on a Redis Cluster, in one pool three files at a time (two cores; see
 * below), longest first, each file with its own database and queue prefix (one pool: run as a
 * group of their own after the suite, two at a time, they left a core idle for ~2 minutes).
 * A worker runs its files one after another without a fresh module graph each
 * (`isolate: false`): importing the engine anew cost ~1 s of CPU per file (63 short files: 202 s
 * -> 128 s, 265 -> 125 s of CPU, measured side by side); every file already starts and stops
 * what it uses (its own database, prefix, servers), and no test mocks a module.
 * The second: the attack tests that bound answer times and memory under a flood of
 * connections (`*.alone.test.ts`), afterwards, one at a time: another test file's processes
 * on the same two cores would be measured with them.
 */
export default defineConfig({
  // @oncehook/* resolve to their TypeScript sources here, not to the dist/ they publish.
  // (The global setup runs in vitest's own environment, `__vitest__`, the tests in `ssr`.)
  environments: {
    ssr: { resolve: { conditions: ['oncehook-source'] } },
    __vitest__: { resolve: { conditions: ['oncehook-source'] } },
  },
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    // Tests spawn real processes and wait on real timeouts (leases, reconciler passes).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.alone.test.ts'],
          // Three files at a time on two cores: many wait on real timeouts (leases, reconciler
          // passes, rate windows), and a third file uses the time the other two wait (a clean
          // CI run: 665 s with two, 610 s with three, every test passing).
          maxWorkers: 3,
          fileParallelism: true,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // The same crash, chaos and queue-facing tests with the queue in Postgres
        // (QUEUE_BACKEND=postgres, no Redis): the bar that mode is shipped on.
        extends: true,
        test: {
          name: 'postgres-queue',
          include: POSTGRES_QUEUE_FILES,
          env: { TEST_QUEUE_BACKEND: 'postgres' },
          // One pool with the suite (one group: vitest wants one maxWorkers for it).
          maxWorkers: 3,
          fileParallelism: true,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // The same crash, chaos and queue-facing tests on a Redis Cluster of the run's own
        // (REDIS_CLUSTER_NODES, QUEUE_SHARDS=6; test/helpers/cluster-setup.ts).
        extends: true,
        test: {
          name: 'redis-cluster',
          include: REDIS_CLUSTER_FILES,
          env: { TEST_REDIS_CLUSTER: '1' },
          globalSetup: ['test/helpers/cluster-setup.ts'],
          maxWorkers: 3,
          fileParallelism: true,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Handler tests of a developer's own module in this checkout (docs/handlers.md, "Your
        // first handler"): `npx vitest run my-handlers/refunds.test.ts`. Empty in CI.
        extends: true,
        test: { name: 'my-handlers', include: ['my-handlers/**/*.test.ts'], sequence: { groupOrder: 3 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: ['test/**/*.alone.test.ts'], fileParallelism: false, sequence: { groupOrder: 2 } },
      },
    ],
  },
});
