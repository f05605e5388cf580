/**
 * The handler SDK's promises to the people using it: mistakes fail loudly, at once, with a
 * message that says what to do; never silently. Real Postgres, the real engine.
 *
 * - the three traps: a step name used twice in one run, a step result that is not plain JSON,
 *   an event type nothing handles (UNHANDLED_EVENTS=fail, and the counter);
 * - a payload that does not match the handler's schema, and one that does parsed once; a step whose kind changed;
 * - defineHandler, handler modules and handler settings refused at start with a clear message.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, defineHandler, HandlerDefinitionError, PermanentError, readSettings, StepUsageError, type Handler } from '@oncehook/sdk';
import { createWorkerMetrics } from '@oncehook/shared';
import { findNonJson, toRecordedJson } from '@oncehook/sdk/internal';
import { createEngineEvents, HandlerRegistry, loadHandlerModules, processJob, subscribeWorkerMetrics } from '@oncehook/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, T, testLog } from './helpers/stack.js';

let db: TestDatabase;
const anything = z.unknown();

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
});

async function runOnce(handler: Handler, eventId: string, type: string, payload: Record<string, unknown> = {}, settings = {}) {
  const rowId = await claimStripe(db.pool, eventId, type, payload);
  const outcome = await processJob(engine(db.pool, [handler], settings), dispatchJob(rowId, eventId));
  const runs = await q.getRuns(db.pool, rowId);
  return { rowId, outcome, run: runs[0], event: await q.getEvent(db.pool, rowId) };
}

async function stepsOf(runId: number) {
  const { rows } = await db.pool.query(`SELECT name FROM ${T.steps} WHERE run_id = $1 ORDER BY name`, [runId]);
  return rows.map((r) => r.name as string);
}

describe('the three traps', () => {
  it('the same step name twice in one run fails the run at the second call, naming the fix', async () => {
    const calls: string[] = [];
    const handler = defineHandler({ name: 'loop', source: 'stripe', type: 'test.loop', payload: anything }, async (_event, ctx) => {
      for (const item of ['a', 'b']) {
        await ctx.step('email', async () => {
          calls.push(item);
          return { sent: item };
        });
      }
    });
    const { run } = await runOnce(handler, 'evt_loop', 'test.loop');
    expect(calls).toEqual(['a']); // the second call never ran
    expect(run).toMatchObject({ state: 'failed', attempts: 1 });
    expect(run?.lastError).toMatch(/^StepUsageError: step name "email" is used twice in one run of handler "loop".*put the loop variable in it: ctx\.step\(`email:\$\{item\.id\}`/);
    expect(await stepsOf(run!.id)).toEqual(['email']);
  });

  it('a step result that is not plain JSON is refused when it is recorded, nothing recorded', async () => {
    let committedWrites = 0;
    const handler = defineHandler({ name: 'dates', source: 'stripe', type: 'test.date', payload: anything }, async (_event, ctx) => {
      await ctx.transaction('write', async (tx) => {
        await tx.query('SELECT 1');
        committedWrites += 1;
        // The types refuse a Date (the cast stands for code the types cannot see).
        return { at: new Date() } as unknown as { at: string };
      });
    });
    const { run } = await runOnce(handler, 'evt_date', 'test.date');
    expect(committedWrites).toBe(1); // the function ran, its transaction rolled back
    expect(run).toMatchObject({ state: 'failed', attempts: 1 });
    expect(run?.lastError).toMatch(/^StepUsageError: step "write" returned a value that is not plain JSON: result\.at is a Date\. .*date\.toISOString\(\)/);
    expect(await stepsOf(run!.id)).toEqual([]);
  });

  it('an external step returning a response object (not plain JSON) is refused after the call; a re-drive calls again with the same key', async () => {
    const keys: string[] = [];
    let fixed = false;
    const handler = defineHandler({ name: 'responses', source: 'stripe', type: 'test.response', payload: anything }, async (_event, ctx) => {
      await ctx.step('call', async ({ idempotencyKey }) => {
        keys.push(idempotencyKey);
        return (fixed ? { status: 200 } : new Response('ok')) as unknown as { status: number };
      });
    });
    const { rowId, run } = await runOnce(handler, 'evt_response', 'test.response');
    expect(run?.lastError).toMatch(/result is a Response/);
    fixed = true;
    await db.pool.query(`UPDATE ${T.runs} SET state = 'received' WHERE id = $1`, [run!.id]);
    await db.pool.query(`UPDATE ${T.events} SET state = 'processing', runs_pending = 1, runs_failed = 0 WHERE id = $1`, [rowId]);
    await processJob(engine(db.pool, [handler]), { ...dispatchJob(rowId, 'evt_response'), handler: 'responses', attempt: 1 });
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
    expect((await q.getRuns(db.pool, rowId))[0]?.state).toBe('done');
  });

  it('an event type nothing handles: failed with a note under UNHANDLED_EVENTS=fail, and counted', async () => {
    const metrics = createWorkerMetrics({ defaultMetrics: false });
    const typo = defineHandler({ name: 'refunds', source: 'stripe', type: 'charge.refund.updated' }, async () => {}); // meant charge.refunded
    const rowId = await claimStripe(db.pool, 'evt_unhandled', 'charge.refunded');
    const events = createEngineEvents(testLog);
    subscribeWorkerMetrics(events, metrics, new HandlerRegistry([typo]));
    const outcome = await processJob(engine(db.pool, [typo], { unhandled: 'fail' }, { events }), dispatchJob(rowId, 'evt_unhandled'));
    expect(outcome).toEqual({ kind: 'unhandled', source: 'stripe', type: 'charge.refunded', state: 'failed' });
    const event = await q.getEvent(db.pool, rowId);
    expect(event).toMatchObject({ state: 'failed' });
    expect(event?.note).toBe('no handler registered for stripe (stripe) "charge.refunded"; failed (UNHANDLED_EVENTS=fail)');
    const series = (await metrics.unhandledTotal.get()).values;
    // Counted as the worker counts it (worker-metrics.ts): a type no loaded handler names is `other`.
    expect(series).toEqual([{ labels: { source: 'stripe', provider: 'stripe', type: 'other' }, value: 1 }]);
  });
});

describe('more mistakes that fail loudly', () => {
  it('a payload that does not match the schema fails the run at once, naming the field', async () => {
    let ran = false;
    const handler = defineHandler(
      { name: 'typed', source: 'stripe', type: 'test.typed', payload: z.object({ data: z.object({ object: z.object({ amount: z.number().int() }) }) }) },
      async () => {
        ran = true;
      },
    );
    const { run } = await runOnce(handler, 'evt_typed', 'test.typed', { data: { object: { amount: 'twelve' } } });
    expect(ran).toBe(false);
    expect(run).toMatchObject({ state: 'failed', attempts: 1 });
    expect(run?.lastError).toMatch(/^PermanentError: the payload does not match handler "typed"'s schema: payload\.data\.object\.amount: /);
  });

  it("a payload schema is parsed once per attempt, and the handler gets its output (a transform's too)", async () => {
    let parses = 0;
    let seen: unknown;
    const counted = z.object({ data: z.object({ object: z.object({ amount: z.number() }) }) }).transform((payload) => {
      parses += 1;
      return { cents: payload.data.object.amount };
    });
    const handler = defineHandler({ name: 'parsed', source: 'stripe', type: 'test.parsed', payload: counted }, async (event) => {
      seen = event.payload;
    });
    const { run } = await runOnce(handler, 'evt_parsed', 'test.parsed', { data: { object: { amount: 1200 } } });
    expect(run).toMatchObject({ state: 'done' });
    expect(seen).toEqual({ cents: 1200 });
    expect(parses).toBe(1);
  });

  it('a step recorded as external and now called as a local step fails, asking for a new name', async () => {
    let version = 1;
    const handler = defineHandler({ name: 'renamed', source: 'stripe', type: 'test.kind', payload: anything }, async (_event, ctx) => {
      if (version === 1) {
        await ctx.step('notify', async () => ({ ok: true }));
        throw new Error('crash after the step');
      }
      await ctx.transaction('notify', async () => ({ ok: true }));
    });
    const { rowId } = await runOnce(handler, 'evt_kind', 'test.kind');
    version = 2;
    const outcome = await processJob(engine(db.pool, [handler]), { ...dispatchJob(rowId, 'evt_kind'), handler: 'renamed', attempt: 1 });
    expect(outcome).toMatchObject({
      runs: [
        {
          kind: 'failed',
          error: expect.stringMatching(
            /step "notify" of handler "renamed" was recorded as an external step \(ctx\.step\) and is now called as ctx\.transaction; give the changed step a new name/,
          ),
        },
      ],
    });
  });

  it('JSON checks name the path of what JSON would change', () => {
    expect(findNonJson({ a: [1, undefined] })).toBe('result.a[1] is undefined');
    expect(findNonJson({ a: new Map() })).toBe('result.a is a Map');
    expect(findNonJson({ n: Number.NaN })).toBe('result.n is NaN');
    expect(findNonJson({ n: 10n })).toBe('result.n is a bigint');
    class Money {
      cents = 1;
    }
    expect(findNonJson([new Money()])).toBe('result[0] is a Money');
    // biome-ignore lint/suspicious/noSparseArray: the sparse array is the point
    expect(findNonJson([1, , 3])).toBe('result[1] is an empty slot (sparse array)');
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(findNonJson(loop)).toBe('result.self is a circular reference');
    expect(findNonJson({ ok: [1, 'a', null, { deep: true }], optional: undefined })).toBeNull();
    expect(toRecordedJson(undefined, 's')).toBeNull();
    expect(toRecordedJson({ a: 1, b: undefined }, 's')).toEqual({ a: 1 });
    expect(() => toRecordedJson({ at: new Date(0) }, 's')).toThrow(StepUsageError);
    expect(new StepUsageError('x')).toBeInstanceOf(PermanentError);
  });

  it('defineHandler refuses what it cannot use, saying what to write instead', () => {
    const run = async () => {};
    const cases: [unknown, RegExp][] = [
      [{ source: 'stripe', type: 'charge.refunded' }, /name is required/],
      [{ name: 'Refunds Handler', source: 'stripe', type: 'charge.refunded' }, /name is required: 1-63 characters of a-z 0-9/],
      [{ name: 'r', source: 'Stripe EU', type: 'charge.refunded' }, /source must be a provider kind/],
      [{ name: 'r', source: 'stripe', type: '' }, /type must be the event type/],
      [{ name: 'r', source: 'x', kind: 'paypal', type: 't' }, /kind must be one of stripe, github/],
      [{ name: 'r', source: 'x', type: 't', payload: { not: 'zod' } }, /payload must be a zod schema/],
      [{ name: 'r', source: 'x', type: 't', retries: 3 }, /retries must be an object, \{ maxAttempts\?: number, backoffMs\?: number \}/],
      [{ name: 'r', source: 'x', type: 't', retries: { maxAttempts: 0 } }, /retries.maxAttempts must be a whole number from 1 to 1000 \(got 0\)/],
      [{ name: 'r', source: 'x', type: 't', retries: { backoffMs: -5 } }, /retries.backoffMs must be a whole number of milliseconds from 0 to 600000 \(got -5\)/],
      [{ name: 'r', source: 'x', type: 't', retries: { attempts: 3 } }, /retries has no "attempts"; it takes maxAttempts and backoffMs/],
    ];
    for (const [options, message] of cases) {
      expect(() => defineHandler(options as never, run)).toThrow(message);
    }
    expect(() => defineHandler({ name: 'r', source: 'x', type: 't', payload: anything }, undefined as never)).toThrow(/the second argument must be the handler function/);
  });

  it('two handlers with one name are refused', () => {
    const a = defineHandler({ name: 'same', source: 'stripe', type: 'charge.refunded' }, async () => {});
    const b = defineHandler({ name: 'same', source: 'github', type: 'push' }, async () => {});
    expect(() => new HandlerRegistry([a, b])).toThrow(/two handlers are named "same" \(stripe charge.refunded and github push.*\); handler and destination names must be unique/);
  });

  it('readSettings names every bad variable', () => {
    expect(() =>
      readSettings({ REFUNDS_EMAIL_API_URL: z.string().url(), REFUNDS_LIMIT: z.coerce.number().int() }, { REFUNDS_EMAIL_API_URL: 'not a url', REFUNDS_LIMIT: 'x' }),
    ).toThrow(/Invalid handler settings; fix these environment variables:\n {2}REFUNDS_EMAIL_API_URL: .*\n {2}REFUNDS_LIMIT: /);
    expect(() => readSettings({ NEEDED: z.string() }, {})).toThrow(ConfigError);
    expect(readSettings({ N: z.coerce.number().default(3) }, { N: '' })).toEqual({ N: 3 }); // empty = unset
  });
});

describe('steps keyed on the domain object ({ key })', () => {
  it('two events about one object send the same key; another object or another step, another key', async () => {
    const keys: Record<string, string> = {};
    const handler = defineHandler({ name: 'orders', source: 'stripe', type: 'test.order', payload: anything }, async (event, ctx) => {
      const order = String((event.payload as { order: string }).order);
      await ctx.step(
        'charge',
        async ({ idempotencyKey }) => {
          keys[`${event.eventId}:charge`] = idempotencyKey;
          return null;
        },
        { key: `order:${order}` },
      );
      await ctx.step(
        'receipt',
        async ({ idempotencyKey }) => {
          keys[`${event.eventId}:receipt`] = idempotencyKey;
          return null;
        },
        { key: `order:${order}` },
      );
      await ctx.step('note', async ({ idempotencyKey }) => {
        keys[`${event.eventId}:note`] = idempotencyKey;
        return null;
      });
    });
    for (const [eventId, order] of [
      ['evt_o1', 'A'],
      ['evt_o2', 'A'],
      ['evt_o3', 'B'],
    ] as const) {
      const { run } = await runOnce(handler, eventId, 'test.order', { order });
      expect(run?.state).toBe('done');
    }
    expect(keys['evt_o1:charge']).toBe(keys['evt_o2:charge']);
    expect(keys['evt_o1:receipt']).toBe(keys['evt_o2:receipt']);
    expect(keys['evt_o1:charge']).not.toBe(keys['evt_o1:receipt']);
    expect(keys['evt_o1:charge']).not.toBe(keys['evt_o3:charge']);
    // Without a key, each event its own.
    expect(keys['evt_o1:note']).not.toBe(keys['evt_o2:note']);
    const { rows } = await db.pool.query<{ key_subject: string | null }>(`SELECT key_subject FROM ${T.steps} WHERE name = 'charge' LIMIT 1`);
    expect(rows[0]?.key_subject).toBe('order:A');
  });

  it.each([
    ['an empty key', ''],
    ['a key with a control character', 'order:\n1'],
    ['a key that is not a string', 42],
  ])('%s fails the run before the call, saying what a key is', async (_what, key) => {
    let called = false;
    const handler = defineHandler({ name: 'badkey', source: 'stripe', type: 'test.badkey', payload: anything }, async (_event, ctx) => {
      await ctx.step(
        'charge',
        async () => {
          called = true;
          return null;
        },
        { key: key as string },
      );
    });
    const { run } = await runOnce(handler, `evt_badkey_${String(key).length}_${typeof key}`, 'test.badkey');
    expect(called).toBe(false);
    expect(run).toMatchObject({ state: 'failed', attempts: 1 });
    expect(run?.lastError).toMatch(/^StepUsageError: the key of step "charge" in handler "badkey" must be the id of the object the effect is about/);
  });
});

describe('handler modules (ONCEHOOK_HANDLERS)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'oncehook-modules-'));
    const sdk = path.join(process.cwd(), 'packages/sdk/src/index.ts');
    await writeFile(
      path.join(dir, 'ok.ts'),
      `import { defineHandler } from '${sdk}';\nexport default [defineHandler({ name: 'one', source: 'stripe', type: 'charge.refunded' }, async () => {})];\n`,
    );
    await writeFile(
      path.join(dir, 'again.ts'),
      `import { defineHandler } from '${sdk}';\nexport default defineHandler({ name: 'one', source: 'github', type: 'push' }, async () => {});\n`,
    );
    await writeFile(path.join(dir, 'no-default.ts'), `export const x = 1;\n`);
    await writeFile(path.join(dir, 'plain-function.ts'), `export default async function handle() {}\n`);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads handlers from files and refuses modules that are not handler modules, naming them', async () => {
    expect((await loadHandlerModules(['ok.ts'], dir)).handlers.map((h) => h.name)).toEqual(['one']);
    await expect(loadHandlerModules(['missing.ts'], dir)).rejects.toThrow(/ONCEHOOK_HANDLERS: missing.ts not found/);
    await expect(loadHandlerModules(['no-default.ts'], dir)).rejects.toThrow(/no-default.ts has no default export; export default defineHandler/);
    await expect(loadHandlerModules(['plain-function.ts'], dir)).rejects.toThrow(/plain-function.ts: default export is not a handler made by defineHandler/);
    await expect(loadHandlerModules(['ok.ts', 'again.ts'], dir)).rejects.toThrow(HandlerDefinitionError);
    await expect(loadHandlerModules(['ok.ts', 'again.ts'], dir)).rejects.toThrow(/two handlers are named "one".*from again.ts/);
  });
});
