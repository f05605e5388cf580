/**
 * `npm run migrate [-- --set NAME --dir PATH ...]`: create the database if missing, then apply
 * Oncehook's pending migrations (in ONCEHOOK_SCHEMA), then each application set given, e.g. the
 * example shop's: `npm run migrate -- --set shop --dir examples/shop/migrations`. Prints what it
 * applied; exits 1 (with the reason on stderr) when anything failed, 2 on bad arguments.
 */
import { parseArgs } from 'node:util';
import { loadCommonConfig } from '@oncehook/shared';
import { createLogger } from '@oncehook/shared';
import { announce, runMain } from '@oncehook/shared';
import { ensureDatabase, migrate, type MigrationSet } from '@oncehook/core';
import { createPool } from '@oncehook/shared';

runMain(async () => {
  let sets: MigrationSet[];
  try {
    const { values } = parseArgs({ options: { set: { type: 'string', multiple: true }, dir: { type: 'string', multiple: true } } });
    const names = values.set ?? [];
    const dirs = values.dir ?? [];
    if (names.length !== dirs.length) throw new Error('give --set NAME and --dir PATH in pairs');
    sets = names.map((name, i) => ({ name, dir: dirs[i]! }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\nusage: npm run migrate [-- --set NAME --dir PATH ...]\n`);
    process.exit(2);
  }
  const config = loadCommonConfig();
  const log = createLogger('migrate', config.LOG_LEVEL, config.LOG_FORMAT);
  if (await ensureDatabase(config.DATABASE_URL)) announce('created database');
  const pool = createPool(config.DATABASE_URL, { max: 1, applicationName: 'oncehook-migrate' });
  try {
    const result = await migrate(pool, { schema: config.ONCEHOOK_SCHEMA, sets });
    if (result.upgradedLegacy) announce(`moved Oncehook's tables from public into schema ${config.ONCEHOOK_SCHEMA}`);
    log.info({ applied: result.applied }, result.applied.length ? `applied ${result.applied.length} migration(s)` : 'schema up to date');
    announce(result.applied.length ? `applied ${result.applied.length} migration(s): ${result.applied.join(', ')}` : 'schema up to date');
  } finally {
    await pool.end();
  }
});
