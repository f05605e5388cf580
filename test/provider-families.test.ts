/**
 * What real senders do beyond "one signed JSON event per POST", over real HTTP into ingest and
 * real Postgres: GitHub's form-encoded hooks, Shopify's `shopify-*` header set, uppercase hex,
 * Standard Webhooks `v1a` (ed25519), batch deliveries claimed element by element, and the
 * handshakes ingest answers itself without creating an event.
 */
import { createHmac, generateKeyPairSync, sign } from 'node:crypto';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { allSources, META_VERIFY_TOKEN, PROVIDER_CASES, SECRETS, SENDER_SECRETS, send } from '@oncehook/harness';
import { createSource } from '@oncehook/providers';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { type IngestHandle, q, startIngest, testPrefix, T } from './helpers/stack.js';

let db: TestDatabase;
let ingest: IngestHandle;
const ed = generateKeyPairSync('ed25519');
const WHPK = `whpk_${ed.publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('base64')}`;

beforeAll(async () => {
  db = await createTestDatabase();
  const sources = allSources();
  sources.set('sw-asymmetric', createSource({ name: 'sw-asymmetric', kind: 'standard-webhooks', secrets: [WHPK] }, {}));
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources });
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
});

async function rowCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
  return rows[0]?.n ?? -1;
}
const now = () => Math.floor(Date.now() / 1000);
const hmacHex = (key: string, data: string) => createHmac('sha256', key).update(data).digest('hex');

describe('GitHub form-encoded hooks (content_type: form)', () => {
  const json = JSON.stringify({ action: 'opened', issue: { number: 7 }, repository: { full_name: 'acme/app' } });
  const form = `payload=${encodeURIComponent(json)}`;
  const headers = async (body: string, delivery: string) => ({
    'content-type': 'application/x-www-form-urlencoded',
    'x-hub-signature-256': await githubSign(SECRETS.github, body),
    'x-github-delivery': delivery,
    'x-github-hook-id': '99',
    'x-github-event': 'issues',
  });

  it('verifies the raw form bytes, then stores the JSON inside; a redelivery is a duplicate', async () => {
    const res = await send(ingest.url, 'github', { body: form, headers: await headers(form, 'form-1') });
    expect(res).toMatchObject({ status: 202, json: { eventId: '99:form-1' } });
    const row = await q.getEventByKey(db.pool, 'github', '99:form-1');
    expect(row).toMatchObject({ type: 'issues.opened' });
    expect(row?.payload).toEqual(JSON.parse(json));
    // The body hash is the raw bytes': the same form under another delivery id is a duplicate.
    expect(await send(ingest.url, 'github', { body: form, headers: await headers(form, 'form-2') })).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    expect(await rowCount()).toBe(1);
  });

  it('refuses a form without exactly one payload field (400), and a signature over the decoded JSON (401)', async () => {
    const noPayload = 'other=1';
    expect(await send(ingest.url, 'github', { body: noPayload, headers: await headers(noPayload, 'f3') })).toMatchObject({ status: 400, json: { error: 'malformed_payload' } });
    const wrongBytes = { ...(await headers(json, 'f4')) };
    expect(await send(ingest.url, 'github', { body: form, headers: wrongBytes })).toMatchObject({ status: 401, json: { error: 'bad_signature' } });
    expect(await rowCount()).toBe(0);
  });
});

describe("Shopify's shopify-* headers", () => {
  const body = '{"id":820982911946154508,"email":"jon@example.com"}';
  const newSet = (id: string) => ({
    'content-type': 'application/json',
    'shopify-hmac-sha256': shopifyHmac(body, SECRETS.shopify),
    'shopify-webhook-id': id,
    'shopify-topic': 'orders/create',
    'shopify-shop-domain': 'acme.myshopify.com',
    'shopify-event-id': `event-${id}`,
  });

  it('accepts a delivery carrying only the new set; shopify-webhook-id is the key', async () => {
    expect(await send(ingest.url, 'shopify', { body, headers: newSet('new-1') })).toMatchObject({ status: 202, json: { eventId: 'new-1' } });
    expect(await q.getEventByKey(db.pool, 'shopify', 'new-1')).toMatchObject({ type: 'orders/create', meta: { shopDomain: 'acme.myshopify.com', eventId: 'event-new-1' } });
  });

  it('the same delivery under either set is one event; both sets disagreeing is a 400', async () => {
    expect((await send(ingest.url, 'shopify', { body, headers: newSet('both-1') })).status).toBe(202);
    const classic = {
      'content-type': 'application/json',
      'x-shopify-hmac-sha256': shopifyHmac(body, SECRETS.shopify),
      'x-shopify-webhook-id': 'both-1',
      'x-shopify-topic': 'orders/create',
    };
    expect(await send(ingest.url, 'shopify', { body, headers: classic })).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    const mixed = { ...newSet('both-2'), 'x-shopify-webhook-id': 'both-3' };
    expect(await send(ingest.url, 'shopify', { body, headers: mixed })).toMatchObject({ status: 400, json: { error: 'malformed_header' } });
    expect(await rowCount()).toBe(1);
  });
});

describe('Slack: the Events API only', () => {
  it('a verified slash command is refused with a 400 that says so, storing nothing', async () => {
    const body = 'command=%2Fcharge&text=once&trigger_id=13345224609.738474920.8088930838d88f008e0';
    const t = String(now());
    const headers = { 'content-type': 'application/x-www-form-urlencoded', 'x-slack-request-timestamp': t, 'x-slack-signature': `v0=${hmacHex(SECRETS.slack, `v0:${t}:${body}`)}` };
    const res = await send(ingest.url, 'slack', { body, headers });
    expect(res).toMatchObject({ status: 400, json: { error: 'malformed_payload' } });
    expect(String(res.json.message)).toContain('slash command');
    expect(await rowCount()).toBe(0);
  });
});

describe("Slack's documented example (api.slack.com, verifying requests from Slack)", () => {
  it('verifies with the documented secret, timestamp and signature, and is then refused as a slash command', () => {
    const source = createSource({ name: 'slack-doc', kind: 'slack', secrets: ['8f742231b10e8888abcd99yyyzzz85a5'] }, {});
    const body =
      'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': '1531420618',
      'x-slack-signature': 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503',
    };
    const verify = (signature: string) => () =>
      source.verify({
        rawBody: Buffer.from(body),
        header: (name) => ({ ...headers, 'x-slack-signature': signature })[name.toLowerCase()] ?? null,
        now: new Date(1531420618 * 1000),
      });
    // The documented signature passes (the refusal is the scope's, 400); one digit off is a 401.
    expect(verify(headers['x-slack-signature']!)).toThrow(/slash command/);
    expect(verify(headers['x-slack-signature']!.replace(/3$/, '4'))).toThrow(/does not match/);
  });
});

describe('signatures compared as bytes', () => {
  it('an in-house sender printing UPPERCASE hex verifies', async () => {
    const timestamp = now();
    const body = JSON.stringify({ event: { id: 'upper-1', kind: 'order.paid' } });
    const signature = hmacHex(SECRETS.hmac, `${timestamp}.${body}`).toUpperCase();
    const headers = { 'content-type': 'application/json', 'x-internal-timestamp': String(timestamp), 'x-internal-signature': `sha256=${signature}` };
    expect(await send(ingest.url, 'internal', { body, headers })).toMatchObject({ status: 202, json: { eventId: 'upper-1' } });
  });
});

describe('Standard Webhooks v1a (ed25519)', () => {
  const deliver = (id: string, key = ed.privateKey, body = JSON.stringify({ type: 'user.created', data: { id } })) => {
    const timestamp = String(now());
    const signature = sign(null, Buffer.from(`${id}.${timestamp}.${body}`), key).toString('base64');
    return { body, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1a,${signature}` } };
  };

  it('verifies with the whpk_ public key; another key or a tampered body is 401; only a v1 entry (no key for it) is 400', async () => {
    expect(await send(ingest.url, 'sw-asymmetric', deliver('msg_v1a_1'))).toMatchObject({ status: 202, json: { eventId: 'msg_v1a_1' } });
    expect((await send(ingest.url, 'sw-asymmetric', deliver('msg_v1a_2', generateKeyPairSync('ed25519').privateKey))).status).toBe(401);
    const tampered = deliver('msg_v1a_3');
    expect((await send(ingest.url, 'sw-asymmetric', { ...tampered, body: tampered.body.replace('user', 'admin') })).status).toBe(401);
    const symmetric = deliver('msg_v1a_4');
    symmetric.headers['webhook-signature'] = `v1,${createHmac('sha256', 'x').update('y').digest('base64')}`;
    expect(await send(ingest.url, 'sw-asymmetric', symmetric)).toMatchObject({ status: 400, json: { error: 'malformed_header' } });
    expect(await rowCount()).toBe(1);
  });
});

describe('batch deliveries: each element claimed on its own', () => {
  const sendgrid = PROVIDER_CASES.find((c) => c.source === 'sendgrid')!;
  const element = (n: number) => ({ email: `u${n}@example.com`, timestamp: now(), event: 'delivered', sg_event_id: `sg-${n}` });
  const deliverBatch = async (elements: unknown[]) => send(ingest.url, 'sendgrid', await sendgrid.sign(JSON.stringify(elements), { id: 'batch' }));

  it('50 events in one delivery are 50 claims, committed before the answer; a redelivery with 3 new is 3 new events', async () => {
    const fifty = Array.from({ length: 50 }, (_, n) => element(n));
    const first = await deliverBatch(fifty);
    expect(first.status).toBe(202);
    expect((first.json.events as { status: string }[]).every((e) => e.status === 'accepted')).toBe(true);
    // The answer came after the commit: every row is there the moment it arrives.
    expect(await rowCount()).toBe(50);
    const again = await deliverBatch([...fifty, element(50), element(51), element(52)]);
    expect(again.status).toBe(202);
    const statuses = (again.json.events as { status: string }[]).map((e) => e.status);
    expect(statuses.filter((s) => s === 'accepted')).toHaveLength(3);
    expect(statuses.filter((s) => s === 'duplicate')).toHaveLength(50);
    expect(await rowCount()).toBe(53);
    // Nothing new at all: 200 duplicate.
    expect(await deliverBatch(fifty.slice(0, 5))).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    expect(await q.getEventByKey(db.pool, 'sendgrid', 'sg-7')).toMatchObject({ type: 'delivered', payload: { sg_event_id: 'sg-7' } });
  });

  it('a retried element whose sg_event_id changed (as reported for SendGrid) is a duplicate by its content', async () => {
    const original = element(1);
    expect((await deliverBatch([original])).status).toBe(202);
    const retried = await deliverBatch([{ ...original, sg_event_id: 'sg-1-retried' }]);
    expect(retried).toMatchObject({ status: 200, json: { events: [{ eventId: 'sg-1-retried', status: 'duplicate' }] } });
    expect(await rowCount()).toBe(1);
  });

  it('a batch larger than the claim waiting room (MAX_WAITING_CLAIMS) is claimed in chunks, not refused', async () => {
    const small = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources: allSources(), env: { MAX_WAITING_CLAIMS: '20' } });
    try {
      const many = Array.from({ length: 150 }, (_, n) => element(1000 + n));
      const res = await send(small.url, 'sendgrid', await sendgrid.sign(JSON.stringify(many), { id: 'big' }));
      expect(res.status).toBe(202);
      expect(await rowCount()).toBe(150);
    } finally {
      await small.close();
    }
  });

  it('an element without its id refuses the whole delivery (400), storing nothing', async () => {
    const res = await deliverBatch([element(1), { event: 'open', timestamp: now() }]);
    expect(res).toMatchObject({ status: 400, json: { error: 'invalid_event_id' } });
    expect(await rowCount()).toBe(0);
  });
});

describe('handshakes: answered by ingest, no event created', () => {
  it("Zoom's endpoint.url_validation gets {plainToken, encryptedToken} only when signed", async () => {
    const body = JSON.stringify({ event: 'endpoint.url_validation', payload: { plainToken: 'qgg8vlvZRS6UYooatFL8Aw' }, event_ts: Date.now() });
    const t = String(now());
    const headers = { 'content-type': 'application/json', 'x-zm-request-timestamp': t, 'x-zm-signature': `v0=${hmacHex(SENDER_SECRETS.zoom, `v0:${t}:${body}`)}` };
    const res = await send(ingest.url, 'zoom', { body, headers });
    expect(res).toEqual({ status: 200, json: { plainToken: 'qgg8vlvZRS6UYooatFL8Aw', encryptedToken: hmacHex(SENDER_SECRETS.zoom, 'qgg8vlvZRS6UYooatFL8Aw') } });
    expect((await send(ingest.url, 'zoom', { body, headers: { ...headers, 'x-zm-signature': `v0=${'0'.repeat(64)}` } })).status).toBe(401);
    expect(await rowCount()).toBe(0);
  });

  it("Twitch's webhook_callback_verification is answered with the challenge as text; a revocation with 204", async () => {
    const twitch = PROVIDER_CASES.find((c) => c.source === 'twitch')!;
    const body = JSON.stringify({ challenge: 'pogchamp-kappa-360noscope-vohiyo', subscription: { id: 's1', type: 'channel.follow', version: '2' } });
    const signed = await twitch.sign(body, { id: 'verify-1' });
    const headers = { ...signed.headers, 'twitch-eventsub-message-type': 'webhook_callback_verification' };
    const response = await fetch(`${ingest.url}/webhooks/twitch`, { method: 'POST', body, headers });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await response.text()).toBe('pogchamp-kappa-360noscope-vohiyo');
    const revoked = await fetch(`${ingest.url}/webhooks/twitch`, { method: 'POST', body, headers: { ...headers, 'twitch-eventsub-message-type': 'revocation' } });
    expect(revoked.status).toBe(204);
    expect(await rowCount()).toBe(0);
  });

  it("Meta's GET subscription check echoes hub.challenge for the right verify token only", async () => {
    const ok = await fetch(`${ingest.url}/webhooks/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=${META_VERIFY_TOKEN}`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('1158201444');
    const wrong = await fetch(`${ingest.url}/webhooks/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess`);
    expect(wrong.status).toBe(403);
    // A sender without a GET check still answers 405 to a GET.
    expect((await fetch(`${ingest.url}/webhooks/stripe`)).status).toBe(405);
    expect(await rowCount()).toBe(0);
  });

  it("Discord's PING (type 0) is a 204, nothing stored", async () => {
    const discord = PROVIDER_CASES.find((c) => c.source === 'discord')!;
    const ping = await discord.sign(JSON.stringify({ version: 1, application_id: '1234', type: 0 }), { id: 'ping' });
    const response = await fetch(`${ingest.url}/webhooks/discord`, { method: 'POST', body: ping.body, headers: ping.headers });
    expect(response.status).toBe(204);
    expect(await rowCount()).toBe(0);
  });
});
