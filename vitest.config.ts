import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Tests spawn real processes and wait on real timeouts (leases, reconciler passes).
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: two test files at a time, each with its own database and queue prefix.
    pool: 'forks',
    maxWorkers: 2,
    fileParallelism: true,
  },
});
