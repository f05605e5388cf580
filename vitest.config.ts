import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { defineConfig } from 'vitest/config';

/**
 * The longest files of a group start first (they are minutes, most are seconds): started last,
 * one of them would run alone on one core at the end while the other core idles. A clean clone
 * (CI) has no timing cache, and vitest's default then starts the largest files first, which
 * are not the longest. Measured in `npm test` on 2 cores; the rest keep vitest's order.
 */
const LONGEST_FIRST = [
  'test/user-project.test.ts',
  'test/first-minutes.test.ts',
  'test/flow-control.test.ts',
  'test/bench-smoke.test.ts',
  'test/chaos-smoke.test.ts',
  'test/crash-recovery.test.ts',
];

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const index = LONGEST_FIRST.findIndex((file) => spec.moduleId.endsWith(file));
      return index === -1 ? LONGEST_FIRST.length : index;
    };
    // Stable: within each group and project (contiguous in vitest's order) the listed files first.
    const segment = (spec: TestSpecification) => `${String(spec.project.config.sequence.groupOrder).padStart(4, '0')}:${spec.project.name}`;
    return sorted
      .map((spec, i) => ({ spec, i }))
      .sort((a, b) => (segment(a.spec) === segment(b.spec) ? rank(a.spec) - rank(b.spec) || a.i - b.i : a.i - b.i))
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
 * Three groups of test files. The suite runs three at a time (two cores; see below), the others
 * two, each with its own database and queue prefix. A worker runs its files one after another without a fresh module graph each
 * (`isolate: false`): importing the engine anew cost ~1 s of CPU per file (63 short files: 202 s
 * -> 128 s, 265 -> 125 s of CPU, measured side by side); every file already starts and stops
 * what it uses (its own database, prefix, servers), and no test mocks a module. Then the tests that matter for the queue run again with the queue in Postgres.
 * The attack tests that bound answer times and memory under a flood of
 * connections (`*.alone.test.ts`) run afterwards, one at a time: another test file's processes
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
          maxWorkers: 2,
          fileParallelism: true,
          isolate: false,
          sequence: { groupOrder: 1 },
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
          maxWorkers: 2,
          fileParallelism: true,
          isolate: false,
          sequence: { groupOrder: 1 },
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
