import { defineConfig } from 'vitest/config';

/**
 * Two groups of test files. Most run two at a time (two cores), each with its own database and
 * queue prefix. The attack tests that bound answer times and memory under a flood of
 * connections (`*.alone.test.ts`) run afterwards, one at a time: another test file's processes
 * on the same two cores would be measured with them.
 */
export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    // Tests spawn real processes and wait on real timeouts (leases, reconciler passes).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/**/*.alone.test.ts'], maxWorkers: 2, fileParallelism: true, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: ['test/**/*.alone.test.ts'], fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
