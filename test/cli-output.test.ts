/**
 * What the CLI prints is data from outside, and it reaches an operator's terminal (issue 63,
 * F9): an event type, an id and a failure's message holding `ESC [` sequences (clear the
 * screen, move the cursor, recolour) or a bidi override are printed escaped by `list`, `show`
 * and `failures`, never raw.
 */
import { terminalSafe } from '../packages/oncehook/src/cli/terminal.js';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runCliHere } from './helpers/cli-here.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { seedRun, T, testEnv, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let env: Record<string, string>;
const HOSTILE_TYPE = 'invoice.paid\u001b[2J\u001b[H\u001b[31mALL GOOD\u001b[0m';
const HOSTILE_ERROR = 'PermanentError: declined\u001b]0;owned\u0007 \u202eevil\u202c';

beforeAll(async () => {
  db = await createTestDatabase();
  env = testEnv({ databaseUrl: db.url, prefix: testPrefix() });
  const { rows } = await db.pool.query<{ id: number }>(
    `INSERT INTO ${T.events} (provider, kind, event_id, type, payload, state) VALUES ('stripe', 'stripe', $1, $2, '{}', 'failed') RETURNING id`,
    ['evt_\u001b[1Aescape', HOSTILE_TYPE],
  );
  await seedRun(db.pool, rows[0]!.id, { state: 'failed', attempts: 1, lastError: HOSTILE_ERROR });
  await db.pool.query(`UPDATE ${T.runs} SET error_shape = $1`, [HOSTILE_ERROR]);
});
afterAll(async () => {
  await db.drop();
});

it('escapes control characters and bidi overrides in list, show and failures', async () => {
  for (const args of [['list', '--state', 'failed'], ['show', 'stripe/evt_\u001b[1Aescape'], ['failures']]) {
    const result = await runCliHere(args, env);
    expect(result.code, `${args.join(' ')}\n${result.output}`).toBe(0);
    // No raw escape, bell or bidi character reaches the terminal...
    expect(result.output, args.join(' ')).not.toMatch(/[\u001b\u0007\u202e\u202c]/);
    // ...and what was there is still readable.
    if (args[0] !== 'failures') expect(result.output).toContain('invoice.paid\\x1b[2J\\x1b[H');
  }
  const failures = await runCliHere(['failures'], env);
  expect(failures.output).toContain('declined\\x1b]0;owned\\x07 \\u202eevil\\u202c');
});

it('terminalSafe keeps the layout (newlines, tabs) and plain text', () => {
  expect(terminalSafe('a\tb\nc é 日本')).toBe('a\tb\nc é 日本');
  expect(terminalSafe('\u0000\u007f\u0085\u2066')).toBe('\\x00\\x7f\\x85\\u2066');
});

it('a hint names a command that works where it is printed: npm run oncehook -- only in this repository', async () => {
  const { invocation } = await import('../packages/oncehook/src/cli/command.js');
  const { ROOT } = await import('@oncehook/harness');
  const here = { npm_package_name: 'oncehook', npm_lifecycle_event: 'dev', npm_package_json: `${ROOT}/package.json` };
  expect(invocation(here)).toBe('npm run oncehook --');
  // A team's project that happens to be named oncehook has no such script.
  expect(invocation({ ...here, npm_package_json: '/tmp/oncehook-elsewhere/package.json' })).toBe('npx oncehook');
  expect(invocation({ npm_package_name: 'acme-billing', npm_lifecycle_event: 'dev' })).toBe('npx oncehook');
});
