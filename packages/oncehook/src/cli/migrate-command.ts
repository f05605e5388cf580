/**
 * `oncehook migrate [--dir DIR --set NAME]...`: creates the database if missing, applies
 * Oncehook's pending migrations (in ONCEHOOK_SCHEMA), then each set of yours given, in order,
 * each tracked under its name. Prints what it applied.
 */
import { ensureDatabase, migrate, type MigrationSet } from '@oncehook/core';
import { announce, announceLogged, createLogger, createPool } from '@oncehook/shared';
import { loadCommonConfig } from '../config.js';
import { parseArgs } from 'node:util';
import { type Command, UsageError } from './command.js';

const SET_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

export function migrationSets(args: string[]): MigrationSet[] {
  let values: { set?: string[]; dir?: string[] };
  try {
    ({ values } = parseArgs({ args, options: { set: { type: 'string', multiple: true }, dir: { type: 'string', multiple: true } } }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const dirs = values.dir ?? [];
  const names = values.set ?? [];
  if (names.length > dirs.length) throw new UsageError('each --set NAME goes with a --dir PATH');
  return dirs.map((dir, i) => {
    const name = names[i] ?? (dirs.length === 1 ? 'app' : undefined);
    if (!name) throw new UsageError(`give each --dir its --set NAME (the name its migrations are tracked under): --dir ${dir} has none`);
    if (!SET_NAME.test(name)) throw new UsageError(`--set ${JSON.stringify(name)}: use lowercase letters, digits, - and _ (it names the set in oncehook.migrations)`);
    return { name, dir };
  });
}

export const migrateCommand: Command = {
  name: 'migrate',
  summary: "create the database if missing, apply Oncehook's migrations and yours",
  usage: 'oncehook migrate [--dir ./migrations [--set app]]...',
  help: `Applies Oncehook's own migrations (its tables live in ONCEHOOK_SCHEMA, "oncehook" by
default), then each folder of yours given with --dir, in order. Your migrations are files
named NNNN_name.sql (four digits), applied once each in order, tracked under the set's name
(--set; "app" when one --dir is given without it). A file in the folder that is not such a
migration is an error naming it. The whole run is one transaction under an advisory lock: safe
to run from several replicas at once. Uses DATABASE_URL and ONCEHOOK_SCHEMA.`,
  async run(args, { env }) {
    const sets = migrationSets(args);
    const config = loadCommonConfig(env);
    const log = createLogger('migrate', config.LOG_LEVEL, config.LOG_FORMAT);
    if (await ensureDatabase(config.DATABASE_URL)) announce('created database');
    const pool = createPool(config.DATABASE_URL, { max: 1, applicationName: 'oncehook-migrate' });
    try {
      const result = await migrate(pool, { schema: config.ONCEHOOK_SCHEMA, sets });
      if (result.upgradedLegacy) announce(`moved Oncehook's tables from public into schema ${config.ONCEHOOK_SCHEMA}`);
      announceLogged(
        log,
        config.LOG_FORMAT,
        { applied: result.applied },
        result.applied.length ? `applied ${result.applied.length} migration(s)` : 'schema up to date',
        result.applied.length ? `applied ${result.applied.length} migration(s): ${result.applied.join(', ')}` : 'schema up to date',
      );
      return 0;
    } finally {
      await pool.end();
    }
  },
};
