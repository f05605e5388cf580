/**
 * A worker or an ingest pointed at the wrong database says so and stops (issue 64, finding 3):
 * a database that does not exist, a user Postgres refuses, a database without Oncehook's tables
 * each end the process with exit 1 and one line naming DATABASE_URL or `oncehook migrate`, and
 * nothing ever said "ready". One that cannot reach its database (down, not up yet) waits, a line
 * per try, and is ready once the database answers: an outage does not kill it.
 */
import { createScratchDatabase, freePort, killAllServices, spawnService, startTcpProxy, urlFor } from '@oncehook/harness';
import { afterAll, expect, it } from 'vitest';
import { createTestDatabase } from './helpers/db.js';
import { testEnv, testPrefix } from './helpers/stack.js';

afterAll(async () => {
  await killAllServices();
});

it('a database that does not exist, a refused user, no Oncehook tables: exit 1 with one line saying what to fix, never ready', { timeout: 120_000 }, async () => {
  const empty = await createScratchDatabase({ prefix: 'oncehook_no_tables' });
  try {
    const refusedUser = new URL(urlFor('postgres'));
    refusedUser.username = 'no_such_oncehook_user';
    const cases: [string, string, RegExp][] = [
      [
        'a database that does not exist',
        urlFor('oncehook_no_such_database'),
        /DATABASE_URL names the database "oncehook_no_such_database", which does not exist at .*: create it .* `oncehook migrate`/,
      ],
      ['a user Postgres refuses', refusedUser.toString(), /DATABASE_URL: Postgres at .* refused the user "no_such_oncehook_user" .*: fix the user or password in DATABASE_URL/],
      ['no Oncehook tables', empty.url, /the database "oncehook_no_tables[^"]*" at .* has no Oncehook tables \(schema "oncehook"\): run `oncehook migrate` first/],
    ];
    const runs = cases.flatMap(([what, url, message]) =>
      (['worker', 'ingest'] as const).map(async (kind) => {
        const service = spawnService(kind, testEnv({ databaseUrl: url, prefix: testPrefix(), extra: { ONCEHOOK_HANDLERS: '' } }));
        const { code } = await service.exited;
        const output = service.lines.filter((l) => l.trim() !== '');
        expect(code, `${kind}, ${what}:\n${output.join('\n')}`).toBe(1);
        expect(output.at(-1), `${kind}, ${what}`).toMatch(message);
        expect(output.join('\n')).not.toMatch(/worker ready|listening on/);
      }),
    );
    await Promise.all(runs);
  } finally {
    await empty.drop();
  }
});

it('a database that cannot be reached yet: the worker waits, saying so, never ready before it answers; then ready', { timeout: 60_000 }, async () => {
  const db = await createTestDatabase();
  // Postgres behind a proxy that first leads nowhere (nothing listens at its target).
  const proxy = await startTcpProxy(await freePort());
  try {
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const worker = spawnService('worker', testEnv({ databaseUrl: url.toString(), prefix: testPrefix(), extra: { ONCEHOOK_HANDLERS: '' } }));
    await worker.waitFor(/waiting for Postgres at 127\.0\.0\.1:\d+ .*trying again in 2 s/, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(worker.lines.filter((l) => /waiting for Postgres/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(worker.lines.join('\n')).not.toMatch(/worker ready/);
    expect(worker.proc.exitCode).toBeNull();
    proxy.pointAt(Number(new URL(db.url).port || 5432));
    await worker.waitFor(/worker ready/, 20_000);
    await worker.stop();
  } finally {
    await proxy.close();
    await db.drop();
  }
});
