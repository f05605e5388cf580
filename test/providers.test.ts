/**
 * Every built-in provider, end to end over real HTTP into ingest and real Postgres: requests
 * signed by the provider's official SDK are accepted; a tampered body, a wrong secret, a stale
 * and a future timestamp are rejected (nothing stored); a redelivery that differs only in
 * attempt fields is a duplicate.
 */
import '@shopify/shopify-api/adapters/web-api';
import { ApiVersion, shopifyApi } from '@shopify/shopify-api';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMetricsProbe } from './helpers/metrics.js';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { allSources, PROVIDER_CASES, SECRETS, send, waitFor } from '@oncehook/harness';
import { SENDER_SCHEMES } from '@oncehook/providers';
import { type IngestHandle, q, startIngest, testPrefix, T } from './helpers/stack.js';

let db: TestDatabase;
let ingest: IngestHandle;
const metrics = createMetricsProbe();

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources: allSources(), metrics: metrics.metrics });
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query(`TRUNCATE ${T.events} CASCADE`);
  await ingest.queue.obliterate({ force: true });
});

async function rowCount(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
  return rows[0]?.n ?? -1;
}

const now = () => Math.floor(Date.now() / 1000);

describe.each(PROVIDER_CASES)('$source', (p) => {
  it('accepts an officially signed delivery and stores the stable id and type', async () => {
    const id = `${p.source}-evt-1`;
    const res = await send(ingest.url, p.source, await p.sign(p.body(id), { id }));
    // A batch answers per element (events[]); a single delivery with its eventId.
    expect(res).toMatchObject({
      status: 202,
      json: p.batch ? { status: 'accepted', events: [{ eventId: p.storedId(id), status: 'accepted' }] } : { status: 'accepted', eventId: p.storedId(id) },
    });
    const row = await q.getEventByKey(db.pool, p.source, p.storedId(id));
    expect(row).toMatchObject({ state: 'received', type: p.type, runsPending: 0 });
    // The job is added right after the answer (the enqueue relay), not before it.
    await waitFor(async () => (await ingest.queue.count()) === 1, { what: 'the dispatch job queued' });
  });

  it('answers a redelivery that differs only in attempt fields as a duplicate', async () => {
    const id = `${p.source}-evt-redeliver`;
    const body = p.body(id);
    expect((await send(ingest.url, p.source, await p.sign(body, { id, timestamp: now() - 30 }))).status).toBe(202);
    const again = await send(ingest.url, p.source, await p.sign(body, { id, timestamp: now(), attempt: 2 }));
    expect(again).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    expect(await rowCount()).toBe(1);
  });

  it('rejects a wrong secret (401), storing nothing', async () => {
    const id = `${p.source}-evt-wrong-secret`;
    const secret = p.source === 'standard-webhooks' || p.source === 'svix' ? `whsec_${Buffer.from('an-attacker-guessed-key-32-bytes').toString('base64')}` : 'not-the-secret';
    expect(await send(ingest.url, p.source, await p.sign(p.body(id), { id, secret }))).toMatchObject({ status: 401, json: { error: p.rejection ?? 'bad_signature' } });
    expect(await rowCount()).toBe(0);
  });
});

// Every sender whose signature covers the body (token/Basic senders and Mailgun below).
describe.each(PROVIDER_CASES.filter((c) => c.authenticatesBody !== false))('$source body', (p) => {
  it('rejects a tampered body (401), storing nothing', async () => {
    const id = `${p.source}-evt-tampered`;
    const signed = await p.sign(p.body(id), { id });
    const text = signed.body.toString();
    // A JSON body gains a field; a form body (Twilio) a parameter.
    const tampered = { ...signed, body: text.includes('}') ? text.replace('}', ',"extra":1}') : `${text}&extra=1` };
    expect(await send(ingest.url, p.source, tampered)).toMatchObject({ status: 401, json: { error: 'bad_signature' } });
    expect(await rowCount()).toBe(0);
  });
});

// A signature of a version or algorithm the scheme does not name is refused before the body.
describe.each(
  Object.values(SENDER_SCHEMES).flatMap((scheme) => {
    const { signature } = scheme;
    if (signature.family !== 'hmac' || (!signature.prefix && !signature.list)) return [];
    const from = signature.list ? `${signature.list.signatureKey}=` : signature.prefix!;
    return [{ source: scheme.kind, header: signature.header.toLowerCase(), from, to: signature.list ? 'v9=' : `x${signature.prefix}` }];
  }),
)('$source: an unknown signature version', ({ source, header, from, to }) => {
  it(`the "${from}" of the signature replaced is a 400, nothing stored`, async () => {
    const p = PROVIDER_CASES.find((c) => c.source === source)!;
    const signed = await p.sign(p.body(`${source}-version`), { id: `${source}-version` });
    const headers = { ...signed.headers, [header]: signed.headers[header]!.replace(from, to) };
    expect(await send(ingest.url, source, { ...signed, headers })).toMatchObject({ status: 400, json: { error: 'malformed_header' } });
    expect(await rowCount()).toBe(0);
  });
});

// No signature over the body: what stands in for one is tested instead (docs/providers.md).
describe('senders whose credentials do not cover the body', () => {
  it.each(['gitlab', 'postmark'])('%s: a captured body replayed under a new id is a duplicate (the body hash is always a key)', async (source) => {
    const p = PROVIDER_CASES.find((c) => c.source === source)!;
    const body = p.body(`${source}-captured`);
    expect((await send(ingest.url, source, await p.sign(body, { id: `${source}-first` }))).status).toBe(202);
    expect(await send(ingest.url, source, await p.sign(body, { id: `${source}-forged-next` }))).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    expect(await rowCount()).toBe(1);
  });

  it('mailgun: a captured signature carried by another body is a duplicate (the token is the replay key)', async () => {
    const p = PROVIDER_CASES.find((c) => c.source === 'mailgun')!;
    const signed = await p.sign(p.body('mg-real'), { id: 'mg-real' });
    expect((await send(ingest.url, 'mailgun', signed)).status).toBe(202);
    const forged = { ...signed, body: signed.body.toString().replace('"id":"mg-real"', '"id":"mg-forged"') };
    expect(await send(ingest.url, 'mailgun', forged)).toMatchObject({ status: 200, json: { status: 'duplicate' } });
    expect(await rowCount()).toBe(1);
  });
});

// GitHub and Shopify sign no timestamp: the dedupe key is their only replay protection.
describe.each(PROVIDER_CASES.filter((c) => c.timestamped))('$source timestamps', (p) => {
  it('rejects a stale and a future timestamp with distinct reasons', async () => {
    const id = `${p.source}-evt-time`;
    const tolerance = p.tolerance ?? (p.source === 'paddle' ? 60 : 300);
    const stale = await send(ingest.url, p.source, await p.sign(p.body(id), { id, timestamp: now() - tolerance - 30 }));
    expect(stale).toMatchObject({ status: 401, json: { error: 'timestamp_too_old' } });
    const future = await send(ingest.url, p.source, await p.sign(p.body(id), { id, timestamp: now() + tolerance + 30 }));
    expect(future).toMatchObject({ status: 401, json: { error: 'timestamp_in_future' } });
    expect(await rowCount()).toBe(0);
  });
});

describe('provider specifics', () => {
  it('never accepts Stripe v0 signatures', async () => {
    const body = JSON.stringify({ id: 'evt_v0', type: 'x', created: now() });
    const t = now();
    const { createHmac } = await import('node:crypto');
    const v0 = createHmac('sha256', SECRETS.stripe).update(`${t}.${body}`).digest('hex');
    const res = await send(ingest.url, 'stripe', { body, headers: { 'stripe-signature': `t=${t},v0=${v0}` } });
    expect(res).toMatchObject({ status: 400, json: { error: 'malformed_header' } });
    expect(await rowCount()).toBe(0);
  });

  it('accepts any of several Stripe v1 signatures while a secret rolls', async () => {
    const body = PROVIDER_CASES[0]!.body('evt_rolling');
    const t = now();
    const { createHmac } = await import('node:crypto');
    const other = createHmac('sha256', 'whsec_the_other_secret').update(`${t}.${body}`).digest('hex');
    const ours = createHmac('sha256', SECRETS.stripe).update(`${t}.${body}`).digest('hex');
    const res = await send(ingest.url, 'stripe', { body, headers: { 'stripe-signature': `t=${t},v1=${other},v1=${ours}` } });
    expect(res.status).toBe(202);
  });

  it('refuses GitHub deliveries signed only with the legacy SHA-1 header', async () => {
    const { createHmac } = await import('node:crypto');
    const body = '{"zen":"hi"}';
    const res = await send(ingest.url, 'github', {
      body,
      headers: {
        'x-hub-signature': `sha1=${createHmac('sha1', SECRETS.github).update(body).digest('hex')}`,
        'x-github-delivery': 'd1',
        'x-github-hook-id': '1',
        'x-github-event': 'ping',
      },
    });
    expect(res.status).toBe(400);
    expect(String(res.json.message)).toMatch(/X-Hub-Signature-256.*legacy SHA-1/);
  });

  it('keys GitHub on hook id + delivery; with body dedupe (the default) a second hook delivering the same body is a duplicate', async () => {
    const github = PROVIDER_CASES.find((c) => c.source === 'github')!;
    const signed = await github.sign(github.body('x'), { id: 'shared-delivery-guid' });
    expect(await send(ingest.url, 'github', signed)).toMatchObject({ status: 202, json: { eventId: '424242:shared-delivery-guid' } });
    expect(await send(ingest.url, 'github', { ...signed, headers: { ...signed.headers, 'x-github-hook-id': '777' } })).toMatchObject({
      status: 200,
      json: { status: 'duplicate' },
    });
    expect(await rowCount()).toBe(1);

    // bodyDedupe: false keys on hook id + delivery alone: two hooks, two events.
    const { createSource } = await import('@oncehook/providers');
    const sources = new Map([['github', createSource({ name: 'github', kind: 'github', secrets: [SECRETS.github], bodyDedupe: false }, {})]]);
    const local = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources });
    try {
      const other = await github.sign(github.body('y'), { id: 'other-delivery-guid' });
      expect((await send(local.url, 'github', other)).status).toBe(202);
      expect((await send(local.url, 'github', { ...other, headers: { ...other.headers, 'x-github-hook-id': '777' } })).status).toBe(202);
      expect(await rowCount()).toBe(3);
    } finally {
      await local.close();
    }
  });

  it('records Shopify metadata (event id, shop) beside the webhook id', async () => {
    const shopify = PROVIDER_CASES.find((c) => c.source === 'shopify')!;
    await send(ingest.url, 'shopify', await shopify.sign(shopify.body('w1'), { id: 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043' }));
    const row = await q.getEventByKey(db.pool, 'shopify', 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043');
    expect(row?.meta).toMatchObject({ eventId: 'event-b54557e4-bdd9-4b37-8a5f-bf7d70bcd043', shopDomain: 'acme.myshopify.com' });
  });

  it("answers Slack's url_verification challenge only after verifying, storing nothing", async () => {
    const slack = PROVIDER_CASES.find((c) => c.source === 'slack')!;
    const body = JSON.stringify({ type: 'url_verification', token: 'x', challenge: 'c-123' });
    const ok = await send(ingest.url, 'slack', await slack.sign(body, { id: 'n/a' }));
    expect(ok).toEqual({ status: 200, json: { challenge: 'c-123' } });
    const forged = await send(ingest.url, 'slack', await slack.sign(body, { id: 'n/a', secret: 'wrong' }));
    expect(forged.status).toBe(401);
    expect(await rowCount()).toBe(0);
  });

  it('acknowledges a verified Slack envelope without an event (app_rate_limited), storing nothing', async () => {
    const slack = PROVIDER_CASES.find((c) => c.source === 'slack')!;
    const body = JSON.stringify({ type: 'app_rate_limited', team_id: 'T1', minute_rate_limited: 1518467820, api_app_id: 'A1' });
    expect(await send(ingest.url, 'slack', await slack.sign(body, { id: 'n/a' }))).toEqual({ status: 200, json: { ok: true } });
    expect(await rowCount()).toBe(0);
    expect(await ingest.queue.count()).toBe(0);
  });

  it('rotation: a source with two secrets accepts either', async () => {
    const { createSource } = await import('@oncehook/providers');
    const rotating = new Map([['rotating', createSource({ name: 'rotating', kind: 'stripe', secrets: ['whsec_old-secret-0123456789', 'whsec_new-secret-0123456789'] }, {})]]);
    const local = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources: rotating });
    try {
      const { signStripe } = await import('@oncehook/harness');
      expect((await send(local.url, 'rotating', signStripe({ id: 'evt_old', type: 't', created: now() }, { secret: 'whsec_old-secret-0123456789' }))).status).toBe(202);
      expect((await send(local.url, 'rotating', signStripe({ id: 'evt_new', type: 't', created: now() }, { secret: 'whsec_new-secret-0123456789' }))).status).toBe(202);
      expect((await send(local.url, 'rotating', signStripe({ id: 'evt_bad', type: 't', created: now() }, { secret: 'whsec_other-secret-0123456789' }))).status).toBe(401);
    } finally {
      await local.close();
    }
  });
});

describe('dedupe namespaces and the pre-consumption attack', () => {
  it('two sources whose providers use the same event id do not collide', async () => {
    const { signStripe } = await import('@oncehook/harness');
    const event = { id: 'evt_same_everywhere', type: 'charge.succeeded', created: now() };
    expect((await send(ingest.url, 'stripe', signStripe(event, { secret: SECRETS.stripe }))).status).toBe(202);
    expect((await send(ingest.url, 'stripe-eu', signStripe(event, { secret: SECRETS.stripeEu }))).status).toBe(202);
    expect(await q.getEventByKey(db.pool, 'stripe', 'evt_same_everywhere')).not.toBeNull();
    expect(await q.getEventByKey(db.pool, 'stripe-eu', 'evt_same_everywhere')).not.toBeNull();
  });

  it.each(PROVIDER_CASES)('$source: a forged delivery carrying a future event id cannot pre-consume it', async (p) => {
    const id = `${p.source}-future-evt-42`;
    // The attacker knows (or guesses) the id but not the secret: unsigned, then wrongly signed.
    const real = await p.sign(p.body(id), { id });
    // Mailgun's signature travels in the body: its unsigned copy has none there either.
    const unsignedBody = p.source === 'mailgun' ? JSON.stringify({ ...JSON.parse(real.body.toString()), signature: undefined }) : real.body;
    const unsigned = { body: unsignedBody, headers: { 'content-type': 'application/json' } };
    // Missing Basic credentials are a 401 (as HTTP has it); a missing signature header a 400.
    expect((await send(ingest.url, p.source, unsigned)).status).toBe(p.source === 'postmark' ? 401 : 400);
    const secret = p.source === 'standard-webhooks' || p.source === 'svix' ? `whsec_${Buffer.from('attacker-key-attacker-key-32byte').toString('base64')}` : 'attacker';
    expect((await send(ingest.url, p.source, await p.sign(p.body(id), { id, secret }))).status).toBe(401);
    expect(await rowCount()).toBe(0);
    // The real event arrives, signed: it is new, and processed.
    expect(await send(ingest.url, p.source, real)).toMatchObject({ status: 202, json: { status: 'accepted' } });
  });
});

describe('counted', () => {
  it('counts rejections by reason and malformed JSON after a valid signature', async () => {
    const { signStripe } = await import('@oncehook/harness');
    const before = await metrics.value('webhook_rejections_total', { provider: 'stripe', reason: 'malformed_payload' });
    const res = await send(ingest.url, 'stripe', signStripe('{"id": "evt_broken", '));
    expect(res).toMatchObject({ status: 400, json: { error: 'malformed_payload' } });
    expect(await metrics.value('webhook_rejections_total', { provider: 'stripe', reason: 'malformed_payload' })).toBe(before + 1);
    expect(await metrics.value(`webhook_events_total`, { provider: 'stripe', type: 'unknown', result: 'rejected' })).toBeGreaterThanOrEqual(1);
  });
});

describe('one signature form per scheme: the text the sender prints (the official libraries as oracles)', () => {
  /** A standard base64 value written as base64url without padding: the same bytes, another text. */
  const asBase64url = (value: string) => Buffer.from(value, 'base64').toString('base64url');
  /** The base64 signature headers of each sender, and where the base64 text sits in them. */
  const base64Headers = (source: string): { header: string; rewrite: (value: string) => string }[] => {
    if (source === 'shopify') return [{ header: 'x-shopify-hmac-sha256', rewrite: asBase64url }];
    if (source === 'standard-webhooks' || source === 'svix') {
      const header = source === 'svix' ? 'svix-signature' : 'webhook-signature';
      return [{ header, rewrite: (value) => value.replace(/v1,([A-Za-z0-9+/=]+)/g, (_m, b64: string) => `v1,${asBase64url(b64)}`) }];
    }
    const signature = SENDER_SCHEMES[source as keyof typeof SENDER_SCHEMES]?.signature;
    if (!signature || !('header' in signature) || !('encoding' in signature) || signature.encoding !== 'base64') return [];
    const prefix = 'prefix' in signature ? (signature.prefix ?? '') : '';
    return [{ header: signature.header.toLowerCase(), rewrite: (value) => `${prefix}${asBase64url(value.slice(prefix.length))}` }];
  };
  const cases = PROVIDER_CASES.filter((p) => base64Headers(p.source).length > 0);

  it('covers every sender that signs in base64', () => {
    expect(cases.map((p) => p.source).sort()).toEqual(['hubspot', 'sendgrid', 'shopify', 'square', 'standard-webhooks', 'svix', 'twilio', 'typeform', 'woocommerce']);
  });

  it.each(cases.map((p) => [p.source, p] as const))('%s: a valid signature re-encoded as base64url is refused, nothing stored', async (_source, p) => {
    // A signature whose base64 needs no + / or = reads the same in base64url and would test
    // nothing: sign again (another id; an ECDSA signature is random anyway) until it does. About
    // 1 in 80 SendGrid signatures is such a one (a 72-byte DER signature without + or /): the
    // test failed on it once, in a run of the whole file.
    const signed = async (round: number) => {
      const id = `${p.source}-b64url-${round}`;
      const delivery = await p.sign(p.body(id), { id });
      const headers = { ...delivery.headers };
      for (const { header, rewrite } of base64Headers(p.source)) {
        const value = headers[header];
        expect(value, `${p.source} signs in ${header}`).toBeDefined();
        const rewritten = rewrite(value!);
        if (rewritten === value) return null;
        headers[header] = rewritten;
      }
      return { delivery, headers };
    };
    let found: Awaited<ReturnType<typeof signed>> = null;
    for (let round = 0; found === null && round < 20; round += 1) found = await signed(round);
    if (found === null) throw new Error(`${p.source}: 20 signatures in a row read the same in base64url`);
    const { delivery, headers } = found;
    const refused = await send(ingest.url, p.source, { body: delivery.body, headers });
    expect([400, 401]).toContain(refused.status);
    expect(await rowCount()).toBe(0);
    // The original, as the sender wrote it, is accepted.
    expect((await send(ingest.url, p.source, delivery)).status).toBe(202);
  });

  it('Standard Webhooks and Svix: their official libraries refuse the re-encoded signature too', async () => {
    const body = '{"type":"invoice.paid","data":{"id":"inv_1"}}';
    const msgId = 'msg_b64url';
    const timestamp = new Date();
    for (const [secret, Library] of [
      [SECRETS.standard, StandardWebhook],
      [SECRETS.svix, SvixWebhook],
    ] as const) {
      const signature = new Library(secret).sign(msgId, timestamp, body);
      const headers = (sig: string) => ({ 'webhook-id': msgId, 'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)), 'webhook-signature': sig });
      expect(() => new Library(secret).verify(body, headers(signature))).not.toThrow();
      const reencoded = signature.replace(/v1,([A-Za-z0-9+/=]+)/, (_m, b64: string) => `v1,${Buffer.from(b64, 'base64').toString('base64url')}`);
      expect(() => new Library(secret).verify(body, headers(reencoded))).toThrow();
    }
  });
});

describe("Shopify's two header sets, as shopify-app-js reads them (its webhooks.validate as the oracle)", () => {
  const shopify = shopifyApi({ apiKey: 'oncehook-test', apiSecretKey: SECRETS.shopify, hostName: 'localhost', apiVersion: ApiVersion.October24, isEmbeddedApp: false });
  const body = '{"id":788032119674292922,"title":"Example T-Shirt"}';
  /** Both sets, the events set's topic in its own vocabulary (`Product`, `shopify-action: create`), as Shopify's library tests build them. */
  const bothSets = (hmac: string, classicId: string, eventsId: string): Record<string, string> => ({
    'content-type': 'application/json',
    'x-shopify-hmac-sha256': hmac,
    'x-shopify-topic': 'products/create',
    'x-shopify-shop-domain': 'acme.myshopify.com',
    'x-shopify-api-version': '2024-10',
    'x-shopify-webhook-id': classicId,
    'shopify-hmac-sha256': hmac,
    'shopify-topic': 'Product',
    'shopify-action': 'create',
    'shopify-shop-domain': 'acme.myshopify.com',
    'shopify-api-version': '2024-10',
    'shopify-webhook-id': eventsId,
    'shopify-event-id': `event-${eventsId}`,
    'shopify-resource-id': '788032119674292922',
  });
  const validate = (headers: Record<string, string>) =>
    shopify.webhooks.validate({ rawBody: body, rawRequest: new Request('https://localhost/webhooks/shopify', { method: 'POST', headers, body }) });

  it('a delivery carrying both sets, topics in two vocabularies: valid for the library, accepted here under the same webhook id', async () => {
    const hmac = await shopifyHmac(body, SECRETS.shopify);
    const headers = bothSets(hmac, 'wh-both-1', 'wh-both-1');
    const oracle = await validate(headers);
    expect(oracle).toMatchObject({ valid: true, webhookType: 'events', webhookId: 'wh-both-1' });
    const res = await send(ingest.url, 'shopify', { body, headers });
    expect(res).toMatchObject({ status: 202, json: { eventId: oracle.valid ? oracle.webhookId : '' } });
    // The type: the classic topic (the vocabulary handlers subscribe with); the events set's action in meta.
    expect(await q.getEventByKey(db.pool, 'shopify', 'wh-both-1')).toMatchObject({ type: 'products/create', meta: { action: 'create', resourceId: '788032119674292922' } });
  });

  it('an events delivery alone: the library and ingest read the same id; a bad signature is refused by both', async () => {
    const hmac = await shopifyHmac(body, SECRETS.shopify);
    const events = Object.fromEntries(Object.entries(bothSets(hmac, 'x', 'wh-events-1')).filter(([name]) => !name.startsWith('x-shopify-')));
    expect(await validate(events)).toMatchObject({ valid: true, webhookId: 'wh-events-1', topic: 'PRODUCT' });
    expect(await send(ingest.url, 'shopify', { body, headers: events })).toMatchObject({ status: 202, json: { eventId: 'wh-events-1' } });
    expect(await q.getEventByKey(db.pool, 'shopify', 'wh-events-1')).toMatchObject({ type: 'Product' });
    const forged = { ...events, 'shopify-hmac-sha256': await shopifyHmac(body, 'not-the-secret') };
    expect(await validate(forged)).toMatchObject({ valid: false });
    expect((await send(ingest.url, 'shopify', { body, headers: forged })).status).toBe(401);
  });

  it('two sets naming two different webhook ids: refused (the id is the dedupe key), nothing stored', async () => {
    const hmac = await shopifyHmac(body, SECRETS.shopify);
    const res = await send(ingest.url, 'shopify', { body, headers: bothSets(hmac, 'wh-a', 'wh-b') });
    expect(res).toMatchObject({ status: 400, json: { error: 'malformed_header' } });
    expect(await rowCount()).toBe(0);
  });
});
