/**
 * Declaring sources: provider-named environment variables for the common case, a JSON file
 * for many named sources; errors name what is wrong.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { ConfigError, loadIngestConfig, sourcesFromConfig } from '@oncehook/shared';

async function file(content: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-sources-'));
  const target = path.join(dir, 'sources.json');
  await writeFile(target, typeof content === 'string' ? content : JSON.stringify(content));
  return target;
}

it('one source per provider variable, named after the provider', () => {
  const env = {
    STRIPE_WEBHOOK_SECRET: 'whsec_a',
    GITHUB_WEBHOOK_SECRET: 'gh',
    SHOPIFY_WEBHOOK_SECRET: 'shp',
    STANDARD_WEBHOOKS_SECRET: `whsec_${Buffer.from('0123456789abcdef0123').toString('base64')}`,
    SLACK_SIGNING_SECRET: 'sl',
    PADDLE_WEBHOOK_SECRET: 'pd',
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
      { name: 'resend', kind: 'standard-webhooks', secrets: [`whsec_${Buffer.from('resend-key-resend-key').toString('base64')}`] },
      { name: 'billing', kind: 'hmac', secrets: ['s'], signatureHeader: 'X-Sig', encoding: 'base64', id: { header: 'X-Event-Id' }, type: { field: 'kind' } },
    ],
  });
  const env = { STRIPE_WEBHOOK_SECRET: 'whsec_main', ONCEHOOK_SOURCES_FILE: target, STRIPE_EU_SECRETS: 'whsec_eu_old,whsec_eu_new' };
  const sources = sourcesFromConfig(loadIngestConfig(env), env);
  expect([...sources.keys()]).toEqual(['stripe', 'stripe-eu', 'resend', 'billing']);
  expect(sources.get('billing')?.kind).toBe('hmac');
});

it.each([
  ['a name declared twice', { sources: [{ name: 'stripe', kind: 'stripe', secrets: ['x'] }] }, /declared twice/],
  ['an unknown kind', { sources: [{ name: 'x', kind: 'paypal', secrets: ['x'] }] }, /sources\.0\.kind/],
  ['a bad name', { sources: [{ name: 'Has Spaces', kind: 'github', secrets: ['x'] }] }, /sources\.0\.name/],
  ['a missing secrets variable', { sources: [{ name: 'gh2', kind: 'github', secretsEnv: 'NOT_SET_ANYWHERE' }] }, /NOT_SET_ANYWHERE/],
  ['no secrets at all', { sources: [{ name: 'gh2', kind: 'github' }] }, /no secrets/],
  ['a Standard Webhooks secret that is not base64', { sources: [{ name: 'sw', kind: 'standard-webhooks', secrets: ['whsec_!!!'] }] }, /whsec_ followed by base64/],
  ['an unexpected field', { sources: [{ name: 'gh2', kind: 'github', secrets: ['x'], tolerance: 5 }] }, /sources\.0/],
  ['invalid JSON', '{ sources: [', /not valid JSON/],
])('a sources file with %s fails at start with a readable message', async (_what, content, message) => {
  const target = await file(content);
  const env = { STRIPE_WEBHOOK_SECRET: 'whsec_main', ONCEHOOK_SOURCES_FILE: target };
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(ConfigError);
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(message);
});

it('a missing sources file is named in the error', () => {
  const env = { ONCEHOOK_SOURCES_FILE: '/nonexistent/sources.json' };
  expect(() => sourcesFromConfig(loadIngestConfig(env), env)).toThrow(/cannot read \/nonexistent\/sources.json/);
});
