/**
 * Malformed and hostile requests, table-driven: each gets the right 4xx with a specific
 * reason, and none leaves a row, a job or a crashed process behind.
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { allSources, SECRETS } from '@oncehook/harness';
import { type IngestHandle, startIngest, testPrefix, T } from './helpers/stack.js';

let db: TestDatabase;
let ingest: IngestHandle;

beforeAll(async () => {
  db = await createTestDatabase();
  ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), sources: allSources(), env: { BODY_LIMIT_BYTES: String(256 * 1024) } });
});
afterAll(async () => {
  await ingest.close();
  await db.drop();
});

/** A raw HTTP POST: header values given as arrays are sent as repeated header lines. */
function post(path: string, body: Buffer | string, headers: Record<string, string | string[]>): Promise<{ status: number; json: Record<string, unknown> }> {
  const url = new URL(path, ingest.url);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'content-length': String(Buffer.byteLength(body)), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          json = { raw: text };
        }
        resolve({ status: res.statusCode ?? 0, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const now = () => Math.floor(Date.now() / 1000);
const hmac = (secret: string | Buffer, ...parts: (string | Buffer)[]) => {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest();
};
/** A valid Stripe signature over arbitrary bytes. */
const stripeSig = (body: Buffer | string, t = now()) => `t=${t},v1=${hmac(SECRETS.stripe, `${t}.`, body).toString('hex')}`;
const stripeEvent = (id: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ id, type: 'charge.succeeded', created: now(), ...extra });
const standardKey = Buffer.from(SECRETS.standard.slice('whsec_'.length), 'base64');
const standardHeaders = (id: string, body: string, t = now()) => ({
  'webhook-id': id,
  'webhook-timestamp': String(t),
  'webhook-signature': `v1,${hmac(standardKey, `${id}.${t}.`, body).toString('base64')}`,
});
const githubHeaders = (body: Buffer | string, delivery = 'd-1') => ({
  'x-hub-signature-256': `sha256=${hmac(SECRETS.github, body).toString('hex')}`,
  'x-github-delivery': delivery,
  'x-github-hook-id': '1',
  'x-github-event': 'push',
});

interface Case {
  name: string;
  path: string;
  body: Buffer | string;
  headers: Record<string, string | string[]>;
  status: number;
  error: string;
}

const tenK = `evt_${'a'.repeat(10_000)}`;
const sqlId = "evt_1'; DROP TABLE webhook_events;--";
const nonUtf8 = Buffer.concat([Buffer.from('{"id":"evt_bytes","type":"x","note":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
const nulBody = stripeEvent('evt_nul', { note: 'a\u0000b' });

const CASES: Case[] = [
  { name: 'empty body, no signature', path: '/webhooks/stripe', body: '', headers: {}, status: 400, error: 'missing_header' },
  { name: 'empty body, valid signature', path: '/webhooks/stripe', body: '', headers: { 'stripe-signature': stripeSig('') }, status: 400, error: 'malformed_payload' },
  {
    name: 'Stripe-Signature truncated to t=',
    path: '/webhooks/stripe',
    body: stripeEvent('evt_1'),
    headers: { 'stripe-signature': `t=${now()}` },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'Stripe-Signature truncated mid-signature',
    path: '/webhooks/stripe',
    body: stripeEvent('evt_1'),
    headers: { 'stripe-signature': stripeSig(stripeEvent('evt_1')).slice(0, 40) },
    status: 401,
    error: 'bad_signature',
  },
  {
    name: 'Stripe-Signature non-numeric timestamp',
    path: '/webhooks/stripe',
    body: stripeEvent('evt_1'),
    headers: { 'stripe-signature': 't=yesterday,v1=00' },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'Stripe-Signature duplicated (two header lines)',
    path: '/webhooks/stripe',
    body: stripeEvent('evt_dup_hdr'),
    headers: { 'stripe-signature': [stripeSig(stripeEvent('evt_dup_hdr')), stripeSig(stripeEvent('evt_dup_hdr'))] },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'Stripe id of 10k characters (signed)',
    path: '/webhooks/stripe',
    body: stripeEvent(tenK),
    headers: { 'stripe-signature': stripeSig(stripeEvent(tenK)) },
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Stripe id with SQL (signed)',
    path: '/webhooks/stripe',
    body: stripeEvent(sqlId),
    headers: { 'stripe-signature': stripeSig(stripeEvent(sqlId)) },
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Stripe id with control characters (signed)',
    path: '/webhooks/stripe',
    body: stripeEvent('evt_\u0001\u0007'),
    headers: { 'stripe-signature': stripeSig(stripeEvent('evt_\u0001\u0007')) },
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Stripe Unicode id (signed)',
    path: '/webhooks/stripe',
    body: stripeEvent('évt_ü_1'),
    headers: { 'stripe-signature': stripeSig(stripeEvent('évt_ü_1')) },
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Stripe numeric id (signed)',
    path: '/webhooks/stripe',
    body: stripeEvent(12345),
    headers: { 'stripe-signature': stripeSig(stripeEvent(12345)) },
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Stripe missing type (signed)',
    path: '/webhooks/stripe',
    body: '{"id":"evt_notype"}',
    headers: { 'stripe-signature': stripeSig('{"id":"evt_notype"}') },
    status: 400,
    error: 'malformed_payload',
  },
  { name: 'JSON array body (signed)', path: '/webhooks/stripe', body: '[1,2]', headers: { 'stripe-signature': stripeSig('[1,2]') }, status: 400, error: 'malformed_payload' },
  { name: 'non-UTF-8 bytes (signed)', path: '/webhooks/stripe', body: nonUtf8, headers: { 'stripe-signature': stripeSig(nonUtf8) }, status: 400, error: 'malformed_payload' },
  {
    name: 'non-UTF-8 bytes (unsigned)',
    path: '/webhooks/stripe',
    body: nonUtf8,
    headers: { 'stripe-signature': `t=${now()},v1=${'0'.repeat(64)}` },
    status: 401,
    error: 'bad_signature',
  },
  {
    name: 'JSON string holding \\u0000 (signed; jsonb refuses it)',
    path: '/webhooks/stripe',
    body: nulBody,
    headers: { 'stripe-signature': stripeSig(nulBody) },
    status: 400,
    error: 'unstorable_payload',
  },
  {
    name: 'huge body',
    path: '/webhooks/stripe',
    body: Buffer.alloc(300 * 1024, 0x20),
    headers: { 'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=00` },
    status: 413,
    error: 'payload_too_large',
  },
  {
    name: 'GitHub signature base64 instead of hex',
    path: '/webhooks/github',
    body: '{}',
    headers: { ...githubHeaders('{}'), 'x-hub-signature-256': `sha256=${hmac(SECRETS.github, '{}').toString('base64')}` },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'GitHub signature header duplicated',
    path: '/webhooks/github',
    body: '{}',
    headers: { ...githubHeaders('{}'), 'x-hub-signature-256': [githubHeaders('{}')['x-hub-signature-256'], githubHeaders('{}')['x-hub-signature-256']] },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'GitHub missing X-GitHub-Delivery',
    path: '/webhooks/github',
    body: '{}',
    headers: { 'x-hub-signature-256': githubHeaders('{}')['x-hub-signature-256'], 'x-github-hook-id': '1', 'x-github-event': 'push' },
    status: 400,
    error: 'missing_header',
  },
  {
    name: 'GitHub delivery id of 10k characters (signed)',
    path: '/webhooks/github',
    body: '{}',
    headers: githubHeaders('{}', 'd'.repeat(10_000)),
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Shopify HMAC in hex instead of base64',
    path: '/webhooks/shopify',
    body: '{}',
    headers: { 'x-shopify-hmac-sha256': hmac(SECRETS.shopify, '{}').toString('hex'), 'x-shopify-webhook-id': 'w1', 'x-shopify-topic': 'orders/create' },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'Shopify missing topic',
    path: '/webhooks/shopify',
    body: '{}',
    headers: { 'x-shopify-hmac-sha256': hmac(SECRETS.shopify, '{}').toString('base64'), 'x-shopify-webhook-id': 'w1' },
    status: 400,
    error: 'missing_header',
  },
  {
    name: 'Standard Webhooks missing webhook-timestamp',
    path: '/webhooks/standard-webhooks',
    body: '{}',
    headers: { 'webhook-id': 'msg_1', 'webhook-signature': 'v1,AAAA' },
    status: 400,
    error: 'missing_header',
  },
  {
    name: 'Standard Webhooks signature without v1 entries',
    path: '/webhooks/standard-webhooks',
    body: '{}',
    headers: { ...standardHeaders('msg_1', '{}'), 'webhook-signature': 'v1a,AAAA v2,BBBB' },
    status: 400,
    error: 'malformed_header',
  },
  {
    name: 'Standard Webhooks id with SQL (signed)',
    path: '/webhooks/standard-webhooks',
    body: '{"type":"a"}',
    headers: standardHeaders("msg_1';--", '{"type":"a"}'),
    status: 400,
    error: 'invalid_event_id',
  },
  {
    name: 'Standard Webhooks webhook-id duplicated',
    path: '/webhooks/standard-webhooks',
    body: '{}',
    headers: { ...standardHeaders('msg_1', '{}'), 'webhook-id': ['msg_1', 'msg_1'] },
    status: 401,
    error: 'bad_signature',
  },
  {
    name: 'Slack signature with a wrong version prefix',
    path: '/webhooks/slack',
    body: '{}',
    headers: { 'x-slack-signature': `v1=${'a'.repeat(64)}`, 'x-slack-request-timestamp': String(now()) },
    status: 400,
    error: 'malformed_header',
  },
  { name: 'Paddle signature without h1', path: '/webhooks/paddle', body: '{}', headers: { 'paddle-signature': `ts=${now()}` }, status: 400, error: 'malformed_header' },
  {
    name: 'generic HMAC without its prefix',
    path: '/webhooks/internal',
    body: '{}',
    headers: { 'x-internal-signature': 'abc', 'x-internal-timestamp': String(now()) },
    status: 400,
    error: 'malformed_header',
  },
];

it.each(CASES)('$name -> $status $error, nothing stored', async (c) => {
  const res = await post(c.path, c.body, { 'content-type': 'application/json', ...c.headers });
  expect(res.status).toBe(c.status);
  expect(res.json.error).toBe(c.error);
  expect(typeof res.json.message).toBe('string');
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${T.events}`);
  expect(rows[0]?.n).toBe(0);
  expect(await ingest.queue.count()).toBe(0);
});

it('is still healthy after all of them', async () => {
  expect((await fetch(`${ingest.url}/healthz`)).status).toBe(200);
  expect((await fetch(`${ingest.url}/readyz`)).status).toBe(200);
});

it('answers wrong methods with 405 and unknown providers with 404, on every route shape', async () => {
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
    const res = await fetch(`${ingest.url}/webhooks/github`, { method });
    expect(res.status).toBe(405);
  }
  expect((await post('/webhooks/not-a-source', '{}', {})).status).toBe(404);
  expect((await post('/webhooks/', '{}', {})).status).toBe(404);
});
