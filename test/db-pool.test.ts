/**
 * The connection pool every process uses (packages/shared/src/db/pool.ts), against the real
 * failure: Postgres ends a connection while the process holds it checked out between
 * statements. pg's pool listens only on idle clients; without a listener of our own the
 * client's 'error' event is an uncaught exception that kills the process (it killed every
 * worker of a chaos run at its Postgres restart). Run as a process of its own, so that the
 * crash is the process's exit code.
 */
import { spawnSync } from 'node:child_process';
import { ROOT, nodeArgsFor } from '@oncehook/harness';
import { commitWith, createPool, PIPELINED_TRANSACTIONS, withTransactionFrom, type Pool } from '@oncehook/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';

it('a connection ended by the server while checked out between statements fails its next statement; the process lives and the pool serves the next transaction', () => {
  const child = spawnSync(process.execPath, nodeArgsFor('test/fixtures/pool-connection-ended.ts'), { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  expect(child.status, child.stderr).toBe(0);
  expect(child.stdout).toMatch(/^survived: rolled back \(.*(terminat|connection error).*\); next transaction: 1$/m);
});

it('a pg without the Query internals the one-round-trip path builds on: it turns itself off at load, and the same transactions commit and roll back the same, a round trip per statement', () => {
  const child = spawnSync(process.execPath, nodeArgsFor('test/fixtures/pool-fallback.ts'), { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  expect(child.status, child.stderr).toBe(0);
  expect(child.stdout).toMatch(/^fallback: pipelined=false roundTrips=5 committed=11 rolledBack=true$/m);
});

describe('withTransactionFrom and commitWith: BEGIN with the first statement, COMMIT with the last, each in one round trip (the step transaction’s fence and record)', () => {
  let db: TestDatabase;
  let pool: Pool;
  let other: Pool;
  beforeAll(async () => {
    db = await createTestDatabase();
    // One connection: every call below reuses it, so what it has prepared (or not) carries over.
    pool = createPool(db.url, { max: 1 });
    other = createPool(db.url, { max: 1 });
    await db.pool.query('CREATE TABLE pipelined (id int PRIMARY KEY, n int NOT NULL)');
    await db.pool.query('INSERT INTO pipelined VALUES (1, 0)');
  });
  afterAll(async () => {
    await pool.end();
    await other.end();
    await db.drop();
  });

  const lockRow = (id: number) => ({ name: 'test_lock_row', text: 'SELECT n FROM pipelined WHERE id = $1 FOR NO KEY UPDATE', values: [id] });
  const lockedElsewhere = async () =>
    other.query('SELECT 1 FROM pipelined WHERE id = 1 FOR NO KEY UPDATE NOWAIT').then(
      () => false,
      (error: { code?: string }) => error.code === '55P03',
    );

  it('the installed pg has the internals the one-round-trip path builds on (else each statement is a round trip of its own)', () => {
    expect(PIPELINED_TRANSACTIONS, 'pg changed Query.prepare/_getRows/hasBeenParsed: see docs/dependencies.md, pg').toBe(true);
  });

  it('the statement runs inside the transaction: its row lock is held until COMMIT, and what fn writes commits with it', async () => {
    const seen = await withTransactionFrom<{ n: number }, { n: number; lockedDuring: boolean; sameTransaction: boolean }>(pool, lockRow(1), async (tx, first) => {
      await tx.query('UPDATE pipelined SET n = n + 1 WHERE id = 1');
      // In autocommit the UPDATE would have been a transaction of its own, ended already.
      const xact = await tx.query<{ id: string | null }>('SELECT pg_current_xact_id_if_assigned()::text AS id');
      return { n: first.rows[0]?.n ?? -1, lockedDuring: await lockedElsewhere(), sameTransaction: xact.rows[0]?.id != null };
    });
    expect(seen).toEqual({ n: 0, lockedDuring: true, sameTransaction: true });
    expect(await lockedElsewhere()).toBe(false);
    expect((await db.pool.query('SELECT n FROM pipelined WHERE id = 1')).rows[0]).toEqual({ n: 1 });
  });

  it('an error in fn rolls back what the transaction wrote, the first statement’s lock included; the connection serves the next one', async () => {
    const write = { name: 'test_write_row', text: 'UPDATE pipelined SET n = n + 100 WHERE id = $1 RETURNING n', values: [1] };
    await expect(
      withTransactionFrom(pool, write, async () => {
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await lockedElsewhere()).toBe(false);
    expect((await db.pool.query('SELECT n FROM pipelined WHERE id = 1')).rows[0]).toEqual({ n: 1 });
    expect(await withTransactionFrom<{ n: number }, number | undefined>(pool, lockRow(1), async (_tx, first) => first.rows[0]?.n)).toBe(1);
  });

  it('the statement is prepared once per connection (a named statement, not re-planned per call)', async () => {
    for (let i = 0; i < 3; i += 1) await withTransactionFrom(pool, lockRow(1), async () => null);
    const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'test_lock_row'");
    expect(rows[0]?.n).toBe(1);
  });

  it('a statement that fails to execute fails the call with its own error and nothing stays open', async () => {
    const failing = { name: 'test_divide', text: 'SELECT 1 / $1::int AS x', values: [0] };
    await expect(withTransactionFrom(pool, failing, async () => 'ran')).rejects.toMatchObject({ code: '22012' });
    expect(await withTransactionFrom<{ x: number }, number | undefined>(pool, { ...failing, values: [1] }, async (_tx, first) => first.rows[0]?.x)).toBe(1);
  });

  it('commitWith ends the transaction: the last statement and COMMIT in one round trip, and no second COMMIT after fn', async () => {
    const notices: string[] = [];
    const client = await pool.connect();
    client.on('notice', (notice) => notices.push(notice.message ?? ''));
    client.release();
    const bump = { name: 'test_bump', text: 'UPDATE pipelined SET n = n + 1 WHERE id = $1 RETURNING n', values: [1] };
    const before = (await db.pool.query<{ n: number }>('SELECT n FROM pipelined WHERE id = 1')).rows[0]?.n ?? 0;
    const n = await withTransactionFrom(pool, lockRow(1), async (tx) => {
      await tx.query('UPDATE pipelined SET n = n + 10 WHERE id = 1');
      return (await commitWith<{ n: number }>(tx, bump)).rows[0]?.n;
    });
    expect(n).toBe(before + 11);
    expect(await lockedElsewhere()).toBe(false);
    expect((await db.pool.query('SELECT n FROM pipelined WHERE id = 1')).rows[0]).toEqual({ n: before + 11 });
    // A COMMIT sent after commitWith's would warn "there is no transaction in progress".
    expect(notices).toEqual([]);
  });

  it('commitWith whose statement fails: the COMMIT behind it is skipped, everything the transaction wrote rolls back', async () => {
    const before = (await db.pool.query<{ n: number }>('SELECT n FROM pipelined WHERE id = 1')).rows[0]?.n;
    const failing = { name: 'test_divide_last', text: 'UPDATE pipelined SET n = n / $1::int WHERE id = 1', values: [0] };
    await expect(
      withTransactionFrom(pool, lockRow(1), async (tx) => {
        await tx.query('UPDATE pipelined SET n = n + 1000 WHERE id = 1');
        await commitWith(tx, failing);
      }),
    ).rejects.toMatchObject({ code: '22012' });
    expect((await db.pool.query('SELECT n FROM pipelined WHERE id = 1')).rows[0]).toEqual({ n: before });
    expect(await lockedElsewhere()).toBe(false);
  });

  it('a statement that fails to parse is parsed again next time (BEGIN’s parse does not mark it prepared)', async () => {
    const missing = { name: 'test_missing_table', text: 'SELECT * FROM no_such_table WHERE id = $1', values: [1] };
    await expect(withTransactionFrom(pool, missing, async () => 'ran')).rejects.toMatchObject({ code: '42P01' });
    // The same error again, not "prepared statement does not exist".
    await expect(withTransactionFrom(pool, missing, async () => 'ran')).rejects.toMatchObject({ code: '42P01' });
    await db.pool.query('CREATE TABLE no_such_table (id int)');
    expect(await withTransactionFrom(pool, missing, async (_tx, first) => first.rowCount)).toBe(0);
  });
});
