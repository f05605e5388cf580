/** Names of the suite's own databases (no vitest import: the global setup reads them too). */
import { randomBytes } from 'node:crypto';

/**
 * The names of the suite's own databases: `<prefix><created>_<random>`, the creation time in
 * seconds (base 36), so a run killed mid-way (its afterAll hooks never ran) leaves databases a
 * later run can recognise as stale and drop (global-setup.ts, sweepStaleDatabases).
 */
export const TEST_DATABASE_PREFIXES = ['oncehook_test_', 'oncehook_tpl_'] as const;

export function testDatabaseName(prefix: (typeof TEST_DATABASE_PREFIXES)[number]): string {
  return `${prefix}${Math.floor(Date.now() / 1000).toString(36)}_${randomBytes(6).toString('hex')}`;
}
