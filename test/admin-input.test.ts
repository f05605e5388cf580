/**
 * Admin input (issue 10, finding 8): every malformed id, filter, limit or body the attack run
 * sent is a 400 with a message naming the field, never a 500, and changes nothing; the CLI
 * refuses the same inputs with exit code 2 before touching anything. Plus the token compare
 * (finding 10): a wrong token of any length is a plain 401.
 */
import { deliver, paymentSucceeded, REDIS_URL, signStripe } from '@oncehook/harness';
import { loadIngestConfig } from 'oncehook';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliHere } from './helpers/cli-here.js';
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
  const resolutions = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events.replace('events', 'failure_groups')} WHERE resolved_at IS NOT NULL`);
  expect(resolutions.rows[0]?.n).toBe(0);
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
    ['an unknown filter (a typo must not list everything)', '/admin/api/events?stat=failed', 400],
    ['a payload filter without = or ~', '/admin/api/events?payload=data.object.id', 400],
    ['a payload path with a space', '/admin/api/events?payload=data.ob%20ject%3Dx', 400],
    ['a payload value of 501 characters', `/admin/api/events?payload=a%3D${'x'.repeat(501)}`, 400],
    ['since that is not a time', '/admin/api/events?since=last%20week', 400],
    ['until before since', '/admin/api/events?since=2026-12-02&until=2026-12-01', 400],
    ['a group that is not 12 hex digits', '/admin/api/events?group=ABC', 400],
    ['before that is not a row id', '/admin/api/events?before=-1', 400],
    ['a waiting reason that does not exist', '/admin/api/events?waiting=later', 400],
    ['handler and destination both', '/admin/api/events?handler=a&destination=b', 400],
    ['failure groups of a bad handler name', '/admin/api/failure-groups?handler=Bad%20Name', 400],
    ['failure groups with an unknown filter', '/admin/api/failure-groups?everything=1', 400],
  ])('GET with %s: a clear answer, never a 500', async (_what, path, status) => {
    const answer = await get(path);
    expect(answer.status).toBe(status);
    expect(typeof answer.body.message).toBe('string');
  });

  it('an unknown filter is named as itself, with the filters there are', async () => {
    const answer = await get('/admin/api/events?q=refund');
    expect(answer.status).toBe(400);
    expect(String(answer.body.message)).toMatch(/^q: unknown filter \(the filters: state, waiting, source/);
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
    ['bulk with a bad payload filter', '/admin/api/redrive', '{"payload":"no-operator","reason":"x","dry_run":false}', /bad_body/],
    ['bulk with a group of the wrong shape', '/admin/api/redrive', '{"group":"nothex!","reason":"x","dry_run":false}', /bad_body/],
    ['bulk with a filter as an object', '/admin/api/redrive', '{"state":{"$ne":"done"},"reason":"x","dry_run":false}', /bad_body/],
    ['resolve of a group id of the wrong shape', '/admin/api/failure-groups/xyz/resolve', '{"reason":"x"}', /bad_id/],
    ['resolve without a reason', '/admin/api/failure-groups/0123456789ab/resolve', '{}', /reason_required/],
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
  /** In this process (helpers/cli-here.ts says why); test/cli.test.ts proves the process wiring. */
  const cli = (args: string[]) => runCliHere(args, { DATABASE_URL: db.url, REDIS_URL, QUEUE_BACKEND: TEST_QUEUE_BACKEND, QUEUE_PREFIX: prefix });

  it.each([
    [['list', '--limit=-1'], /--limit: a whole number from 1 to 10000/],
    [['list', '--limit', '1e12'], /--limit: a whole number from 1 to 10000/],
    [['redrive-all', '--state', 'failed', '--limit', '10001', '--reason', 'x'], /--limit: a whole number from 1 to 10000/],
    [['list', '--older-than', '99999999999'], /--older-than: "99999999999" is not a duration/],
    [['list', '--older-than', '4000d'], /--older-than: "4000d" is not a duration \(90, 30m, 2h, 3d; at most 10 years\)/],
    [['list', '--payload', 'data.object.customer'], /--payload: "data.object.customer" has no = or ~: write field.path=value/],
    [['list', '--payload', 'a..b=1'], /--payload: "a..b" is not a field path/],
    [['redrive-all', '--payload', '=x', '--reason', 'x'], /--payload: equals needs a field path/],
    [['list', '--since', 'yesterday'], /--since: "yesterday" is neither a time/],
    [['list', '--since', '1h', '--until', '2h'], /--until: until must be later than since/],
    [['list', '--waiting', 'soon'], /--waiting: one of paused, concurrency, rate-limit/],
    [['list', '--group', 'zz'], /--group: a failure group id is 12 hex digits/],
    [['list', '--source', 'Stripe!'], /--source: "Stripe!" is not a source name/],
    [['show', '1', '--state', 'failed'], /show takes no --state/],
    [['list', '--state', 'bogus'], /state/],
    [['redrive', '99999999999999999999999', '--reason', 'x'], /is neither a row id \(1 to 9007199254740991\) nor source\/event_id/],
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
