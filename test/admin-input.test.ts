/**
 * Admin input (issue 10, finding 8): every malformed id, filter, limit or body the attack run
 * sent is a 400 with a message naming the field, never a 500, and changes nothing; the CLI
 * refuses the same inputs with exit code 2 before touching anything. Plus the token compare
 * (finding 10): a wrong token of any length is a plain 401.
 */
import { spawn } from 'node:child_process';
import { deliver, paymentSucceeded, REDIS_URL, ROOT, signStripe, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { loadIngestConfig } from 'oncehook';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, q, seedRun, startIngest, T, TEST_QUEUE_BACKEND, testPrefix } from './helpers/stack.js';

const TOKEN = 'admin-token-0123456789abcdef';
const auth = { authorization: `Bearer ${TOKEN}` };
const ALICE = 'alice-token-0123456789abcdef';
const BOT = 'deploy-bot-token-0123456789';

let db: TestDatabase;
let ingest: IngestHandle;
let prefix: string;
let failedId: number;

beforeAll(async () => {
  db = await createTestDatabase();
  prefix = testPrefix();
  ingest = await startIngest({ databaseUrl: db.url, prefix, env: { ADMIN_TOKEN: TOKEN, ADMIN_TOKENS: `alice=${ALICE},deploy-bot=${BOT}` } });
  await deliver(ingest.url, signStripe(paymentSucceeded('evt_input_target')));
  const row = await q.getEventByKey(db.pool, 'stripe', 'evt_input_target');
  await seedRun(db.pool, row!.id, { state: 'failed', attempts: 3, lastError: 'boom' });
  failedId = row!.id;
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});

async function unchanged(): Promise<void> {
  expect((await q.getEvent(db.pool, failedId))?.state).toBe('failed');
  const actions = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.actions}`);
  expect(actions.rows[0]?.n).toBe(0);
  expect(await q.listPauses(db.pool)).toEqual([]);
}

async function get(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${ingest.url}${path}`, { headers: auth });
  return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
}

async function post(path: string, body: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${ingest.url}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
  return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
}

describe('the admin API', () => {
  it.each([
    ['an id beyond bigint', '/admin/api/events/99999999999999999999999', 404],
    ['a NUL in the ref', '/admin/api/events/stripe%2F%00', 400],
    ['older_than beyond 10 years', '/admin/api/events?older_than=99999999999', 400],
    ['older_than negative', '/admin/api/events?older_than=-5', 400],
    ['a NUL in a filter', '/admin/api/events?provider=str%00ipe', 400],
    ['limit -1', '/admin/api/events?limit=-1', 400],
    ['limit 1.5', '/admin/api/events?limit=1.5', 400],
    ['limit 1e12', '/admin/api/events?limit=1e12', 400],
    ['an unknown state', '/admin/api/events?state=bogus', 400],
  ])('GET with %s: a clear answer, never a 500', async (_what, path, status) => {
    const answer = await get(path);
    expect(answer.status).toBe(status);
    expect(typeof answer.body.message).toBe('string');
  });

  it.each([
    ['redrive of an id beyond bigint', '/admin/api/events/99999999999999999999999/redrive', '{"reason":"x"}', /bad_id/],
    ['redrive with a null body', `/admin/api/events/{id}/redrive`, 'null', /bad_body/],
    ['redrive with an array body', `/admin/api/events/{id}/redrive`, '[1]', /bad_body/],
    ['redrive with a NUL in the reason', `/admin/api/events/{id}/redrive`, '{"reason":"a\\u0000b"}', /reason_required|bad_body/],
    ['replay with a number as reason', `/admin/api/events/{id}/replay`, '{"reason":5}', /reason_required|bad_body/],
    ['replay with not JSON', `/admin/api/events/{id}/replay`, '{"reason":', /bad_body/],
    ['bulk with limit -1', '/admin/api/redrive', '{"state":"failed","limit":-1,"reason":"x","dry_run":false}', /bad_body/],
    ['bulk with limit 1.5', '/admin/api/redrive', '{"state":"failed","limit":1.5,"reason":"x","dry_run":false}', /bad_body/],
    ['bulk with limit 1e12', '/admin/api/redrive', '{"state":"failed","limit":1e12,"reason":"x","dry_run":false}', /bad_body/],
    ['bulk over the 10,000 cap', '/admin/api/redrive', '{"state":"failed","limit":10001,"reason":"x","dry_run":false}', /bad_body/],
    ['bulk with older_than beyond 10 years', '/admin/api/redrive', '{"state":"failed","older_than":99999999999,"reason":"x","dry_run":false}', /bad_body/],
    ['bulk with a null body', '/admin/api/redrive', 'null', /bad_body/],
    ['bulk with an unknown field', '/admin/api/redrive', '{"state":"failed","everything":true}', /bad_body/],
    ['pause without a reason', '/admin/api/pauses', '{"scope":"handler","name":"mailer"}', /reason_required/],
    ['pause of an unknown scope', '/admin/api/pauses', '{"scope":"queue","name":"mailer","reason":"x"}', /bad_body/],
    ['pause of a name no handler can have', '/admin/api/pauses', '{"scope":"handler","name":"Bad Name","reason":"x"}', /bad_body/],
    ['pause with an unknown field', '/admin/api/pauses', '{"scope":"handler","name":"mailer","reason":"x","everything":true}', /bad_body/],
    ['pause with now not a boolean', '/admin/api/pauses', '{"scope":"handler","name":"mailer","reason":"x","now":"yes"}', /bad_body/],
    ['resume with now', '/admin/api/pauses/resume', '{"scope":"handler","name":"mailer","reason":"x","now":true}', /bad_body/],
    ['resume with a null body', '/admin/api/pauses/resume', 'null', /bad_body/],
  ])('POST %s: 400 naming the problem, nothing changes', async (_what, path, body, code) => {
    const answer = await post(path.replace('{id}', String(failedId)), body);
    expect(answer.status).toBe(400);
    expect(String(answer.body.error)).toMatch(code);
    expect(typeof answer.body.message).toBe('string');
    await unchanged();
  });

  it('a wrong token of any length (shorter, equal, longer) is a plain 401', async () => {
    for (const token of ['x', TOKEN.replace(/.$/, 'X'), `${TOKEN}-and-more`]) {
      const response = await fetch(`${ingest.url}/admin/api/events`, { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(401);
    }
  });
});

describe('the CLI', () => {
  function cli(args: string[]): Promise<{ code: number | null; output: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [...SOURCE_NODE_ARGS, 'packages/oncehook/src/cli/entry.ts', ...args], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: db.url, REDIS_URL, QUEUE_BACKEND: TEST_QUEUE_BACKEND, QUEUE_PREFIX: prefix },
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.on('close', (code) => resolve({ code, output }));
    });
  }

  it.each([
    [['list', '--limit=-1'], /--limit must be a whole number from 1 to 10000/],
    [['list', '--limit', '1e12'], /--limit must be a whole number from 1 to 10000/],
    [['redrive-all', '--state', 'failed', '--limit', '10001', '--reason', 'x'], /--limit must be a whole number from 1 to 10000/],
    [['list', '--older-than', '99999999999'], /--older-than: "99999999999" is not a duration/],
    [['list', '--older-than', '4000d'], /--older-than: "4000d" is more than 10 years/],
    [['list', '--state', 'bogus'], /state/],
    [['redrive', '99999999999999999999999', '--reason', 'x'], /is neither a row id \(1 to 15 digits\) nor provider\/event_id/],
    [['show', 'no-slash-here'], /is neither a row id/],
    [['pause', 'handler'], /pause takes what to pause: handler <name>, destination <name> or source <name>/],
    [['pause', 'queue', 'mailer', '--reason', 'x'], /pause takes what to pause: handler <name>, destination <name> or source <name>/],
    [['pause', 'handler', 'mailer'], /pause needs --reason "why"/],
    [['resume', 'handler', 'Bad Name', '--reason', 'x'], /"Bad Name" is not a handler name \(1-63 characters of a-z 0-9 . _ -\)/],
  ])('%j is refused with exit code 2 and says why', async (args, message) => {
    const result = await cli(args);
    expect(result.code, result.output).toBe(2);
    expect(result.output).toMatch(message);
    await unchanged();
  });
});

// Last: it changes the event.
it('records who acted: a named token (ADMIN_TOKENS) as token:<name>', async () => {
  const response = await fetch(`${ingest.url}/admin/api/events/${failedId}/redrive`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'card issuer back' }),
  });
  expect(response.status).toBe(200);
  const { rows } = await db.pool.query<{ actor: string; reason: string }>(`SELECT actor, reason FROM ${T.actions}`);
  expect(rows).toEqual([{ actor: 'token:alice', reason: 'card issuer back' }]);
  expect(() => loadIngestConfig({ ADMIN_TOKENS: 'alice=short' })).toThrow(/ADMIN_TOKENS: the token of "alice" must be at least 16 characters/);
  expect(() => loadIngestConfig({ ADMIN_TOKENS: 'no-equals-sign-here-at-all' })).toThrow(/ADMIN_TOKENS: each entry is name=token/);
});
