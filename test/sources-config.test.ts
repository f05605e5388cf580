/**
 * Declaring sources: provider-named environment variables for the common case, a JSON file
 * for many named sources; errors name what is wrong.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { ConfigError } from '@oncehook/sdk';
import { createSource, signedDelivery, sourcesFromConfig } from '@oncehook/providers';
import { loadIngestConfig } from 'oncehook';

const MAIN = 'whsec_main_0123456789abcdef';

async function file(content: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-sources-'));
  const target = path.join(dir, 'sources.json');
  await writeFile(target, typeof content === 'string' ? content : JSON.stringify(content));
  return target;
}

it('one source per provider variable, named after the provider', () => {
  const env = {
    STRIPE_WEBHOOK_SECRET: MAIN,
    GITHUB_WEBHOOK_SECRET: 'github-hook-secret-1',
    SHOPIFY_WEBHOOK_SECRET: 'shpss_0123456789abcdef',
    STANDARD_WEBHOOKS_SECRET: `whsec_${Buffer.from('0123456789abcdef01234567').toString('base64')}`,
    SLACK_SIGNING_SECRET: '8f742231b10e8888abcd99yyyzzz85a5',
    PADDLE_WEBHOOK_SECRET: 'pdl_ntfset_01h8brhckjd6qk4n7e4py2340t',
  };
  const sources = sourcesFromConfig(loadIngestConfig(env), env);
  expect([...sources].map(([name, s]) => `${name}:${s.kind}`)).toEqual([
    'stripe:stripe',
    'github:github',
    'shopify:shopify',
    'standard-webhooks:standard-webhooks',
    'slack:slack',
    'paddle:paddle',
  ]);
});

it('a sources file adds named sources, with secrets inline or from an environment variable', async () => {
  const target = await file({
    sources: [
      { name: 'stripe-eu', kind: 'stripe', secretsEnv: 'STRIPE_EU_SECRETS', toleranceSeconds: 120 },
      { name: 'resend', kind: 'standard-webhooks', secrets: [`whsec_${Buffer.from('resend-key-resend-key-resend').toString('base64')}`] },
      {
        name: 'billing',
        kind: 'hmac',
        secrets: ['billing-signing-secret'],
        signatureHeader: 'X-Sig',
        encoding: 'base64',
        id: { header: 'X-Event-Id' },
        signedHeaders: ['X-Event-Id'],
        type: { field: 'kind' },
      },
    ],
  });
  const env = { STRIPE_WEBHOOK_SECRET: MAIN, ONCEHOOK_SOURCES_FILE: target, STRIPE_EU_SECRETS: 'whsec_eu_old_0123456789abcdef,whsec_eu_new_0123456789abcdef' };
  const sources = sourcesFromConfig(loadIngestConfig(env), env);
  expect([...sources.keys()]).toEqual(['stripe', 'stripe-eu', 'resend', 'billing']);
  expect(sources.get('billing')?.kind).toBe('hmac');
});

const GH = 'github-hook-secret-2';
it.each([
  ['a name declared twice', { sources: [{ name: 'stripe', kind: 'stripe', secrets: [MAIN] }] }, /declared twice/],
  ['an unknown kind', { sources: [{ name: 'x', kind: 'paypal', secrets: [GH] }] }, /sources\.0\.kind/],
  ['a bad name', { sources: [{ name: 'Has Spaces', kind: 'github', secrets: [GH] }] }, /sources\.0\.name/],
  ['a missing secrets variable', { sources: [{ name: 'gh2', kind: 'github', secretsEnv: 'NOT_SET_ANYWHERE' }] }, /NOT_SET_ANYWHERE/],
  ['no secrets at all', { sources: [{ name: 'gh2', kind: 'github' }] }, /no secrets/],
  ['a Standard Webhooks secret that is not base64', { sources: [{ name: 'sw', kind: 'standard-webhooks', secrets: ['whsec_!!!'] }] }, /whsec_ followed by base64/],
  [
    'a Standard Webhooks key shorter than 24 bytes',
    { sources: [{ name: 'sw', kind: 'standard-webhooks', secrets: [`whsec_${Buffer.from('sixteen-byte-key').toString('base64')}`] }] },
    /at least 24 bytes \(this one decodes to 16\)/,
  ],
  [
    'a short secret',
    { sources: [{ name: 'gh2', kind: 'github', secrets: ['x'] }] },
    /source gh2: GitHub webhook secret #1 is 1 characters; use the secret the provider generated \(at least 16\)/,
  ],
  ['a Stripe secret without whsec_', { sources: [{ name: 'st2', kind: 'stripe', secrets: ['sk_live_0123456789abcdef'] }] }, /source st2: .*starts with whsec_/],
  [
    'a generic id from a header the signature does not cover',
    { sources: [{ name: 'inhouse', kind: 'hmac', secrets: ['inhouse-signing-secret'], signatureHeader: 'X-Sig', encoding: 'hex', id: { header: 'X-Event-Id' } }] },
    /source inhouse: the event id comes from header X-Event-Id, which the signature does not cover.*List X-Event-Id in signedHeaders .*or set bodyDedupe: true/,
  ],
  [
    'a generic type from an unsigned header',
    {
      sources: [{ name: 'inhouse', kind: 'hmac', secrets: ['inhouse-signing-secret'], signatureHeader: 'X-Sig', encoding: 'hex', id: { field: 'id' }, type: { header: 'X-Type' } }],
    },
    /the event type comes from header X-Type, which the signature does not cover/,
  ],
  ['an unexpected field', { sources: [{ name: 'gh2', kind: 'github', secrets: [GH], tolerance: 5 }] }, /sources\.0/],
  ['invalid JSON', '{ sources: [', /not valid JSON/],
])('a sources file with %s fails at start with a readable message', async (_what, content, message) => {
  const target = await file(content);
  const env = { STRIPE_WEBHOOK_SECRET: MAIN, ONCEHOOK_SOURCES_FILE: target };
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(ConfigError);
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(message);
});

it('a missing sources file is named in the error', () => {
  const env = { ONCEHOOK_SOURCES_FILE: '/nonexistent/sources.json' };
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(/cannot read \/nonexistent\/sources.json/);
});

it('a placeholder secret in a provider variable stops ingest, naming the source', () => {
  const env = { GITHUB_WEBHOOK_SECRET: 'x' };
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(/source github: GitHub webhook secret #1 is 1 characters/);
});

it("a table sender's variables enable it; a missing URL, verify token or a key of the wrong kind stops ingest, naming what to set", () => {
  const base = { DATABASE_URL: 'postgres://x@127.0.0.1/x' };
  const ok = {
    ...base,
    LINEAR_WEBHOOK_SECRET: 'lin_wh_0123456789abcdef',
    HUBSPOT_CLIENT_SECRET: 'hubspot-client-secret-01',
    HUBSPOT_WEBHOOK_URL: 'https://hooks.example.com/webhooks/hubspot',
    META_APP_SECRET: 'meta-app-secret-000000001',
    META_VERIFY_TOKEN: 'verify-me',
  };
  expect([...sourcesFromConfig(loadIngestConfig(ok), ok)].map(([name, s]) => `${name}:${s.kind}`)).toEqual(['linear:linear', 'hubspot:hubspot', 'meta:meta']);
  const refusals: [Record<string, string>, RegExp][] = [
    [{ HUBSPOT_CLIENT_SECRET: 'hubspot-client-secret-01' }, /source hubspot: HubSpot signs the URL it posts to: set HUBSPOT_WEBHOOK_URL/],
    [{ META_APP_SECRET: 'meta-app-secret-000000001' }, /source meta: .* set META_VERIFY_TOKEN/],
    [{ SENDGRID_VERIFICATION_KEY: 'not-a-public-key' }, /source sendgrid: a SendGrid verification key is the base64 public key the dashboard shows/],
    [{ DISCORD_PUBLIC_KEY: 'xyz' }, /source discord: a Discord \(webhook events\) application public key is 64 hex digits/],
    [{ POSTMARK_WEBHOOK_CREDENTIALS: 'no-colon-in-these-credentials' }, /source postmark: Postmark Basic auth credentials secret #1 must be user:password/],
    [{ POSTMARK_WEBHOOK_CREDENTIALS: 'a:b' }, /source postmark: Postmark Basic auth credentials secret #1 is 3 characters; choose credentials of at least 16/],
  ];
  for (const [env, message] of refusals) {
    const full = { ...base, ...env };
    expect(() => sourcesFromConfig(loadIngestConfig(full), full)).toThrow(ConfigError);
    expect(() => sourcesFromConfig(loadIngestConfig(full), full)).toThrow(message);
  }
});

it("a provider's option variable is parsed by its descriptor and reaches its source; a bad one is named at start", () => {
  expect(() => loadIngestConfig({ STRIPE_WEBHOOK_SECRET: MAIN, STRIPE_TOLERANCE_SECONDS: 'soon' })).toThrow(/STRIPE_TOLERANCE_SECONDS/);
  const env = { STRIPE_WEBHOOK_SECRET: MAIN, STRIPE_TOLERANCE_SECONDS: '5' };
  const stripe = sourcesFromConfig(loadIngestConfig(env), env).get('stripe')!;
  const delivery = signedDelivery('stripe', { type: 'charge.refunded' }, MAIN, { timestamp: Math.floor(Date.now() / 1000) - 60 });
  const request = { rawBody: Buffer.from(delivery.body), header: (name: string) => delivery.headers[name.toLowerCase()] ?? null, now: new Date() };
  // 60 s old: inside Stripe's default 300 s, outside the configured 5 s.
  expect(() => stripe.verify(request)).toThrow(/timestamp.*tolerance 5s/);
});

it('a declaration built in code is checked like a sources-file entry: an option its kind does not have is refused by name', () => {
  expect(() => createSource({ name: 'gh2', kind: 'github', secrets: [GH], toleranceSeconds: 5 }, {})).toThrow(ConfigError);
  expect(() => createSource({ name: 'gh2', kind: 'github', secrets: [GH], toleranceSeconds: 5 }, {})).toThrow(/source gh2 is invalid/);
  expect(createSource({ name: 'gh2', kind: 'github', secrets: [GH], bodyDedupe: false }, {}).kind).toBe('github');
});
