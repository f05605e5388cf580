/** `npm run migrate`: create the database if missing, then apply pending migrations. */
import { loadCommonConfig } from '../config';
import { createLogger } from '../logger';
import { ensureDatabase, migrate } from './migrate';
import { createPool } from './pool';

const config = loadCommonConfig();
const log = createLogger('migrate', config.LOG_LEVEL);
if (await ensureDatabase(config.DATABASE_URL)) log.info('created database');
const pool = createPool(config.DATABASE_URL, { max: 1, applicationName: 'oncehook-migrate' });
try {
  const applied = await migrate(pool);
  log.info({ applied }, applied.length ? `applied ${applied.length} migration(s)` : 'schema up to date');
} finally {
  await pool.end();
}
