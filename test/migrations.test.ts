/**
 * Migrations: numbered, applied once, safe to run twice and from several processes at once.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPool, loadMigrations, migrate } from '@oncehook/shared';
import { createEmptyDatabase } from './helpers/db';
import { spawnService } from './helpers/processes';

let database: Awaited<ReturnType<typeof createEmptyDatabase>>;
beforeAll(async () => {
  database = await createEmptyDatabase();
});
afterAll(async () => {
  await database.drop();
});

it('runs concurrently from three processes without error, then again as a no-op', async () => {
  const runs = [1, 2, 3].map(() => spawnService('migrate', { DATABASE_URL: database.url }));
  const exits = await Promise.all(runs.map((r) => r.exited));
  expect(exits.map((e) => e.code)).toEqual([0, 0, 0]);
  // Exactly one of them applied the migrations; the others found the schema up to date.
  const applied = runs.filter((r) => r.lines.some((l) => /applied \d+ migration/.test(l)));
  expect(applied).toHaveLength(1);

  const pool = createPool(database.url, { max: 2 });
  try {
    expect(await migrate(pool)).toEqual([]);
    const { rows } = await pool.query<{ name: string }>('SELECT name FROM oncehook_migrations ORDER BY version');
    expect(rows.map((r) => r.name)).toEqual((await loadMigrations()).map((m) => m.name));
  } finally {
    await pool.end();
  }
});

it('creates a missing database (npm run migrate on a fresh machine)', async () => {
  const url = database.url.replace(/oncehook_empty_\w+$/, `${database.name}_fresh`);
  const run = spawnService('migrate', { DATABASE_URL: url });
  expect((await run.exited).code).toBe(0);
  expect(run.lines.some((l) => l.includes('created database'))).toBe(true);
  const pool = createPool(url.replace(/\/[^/]+$/, '/postgres'), { max: 1 });
  await pool.query(`DROP DATABASE ${database.name}_fresh WITH (FORCE)`);
  await pool.end();
});
