/**
 * Config is parsed once, with a readable failure naming each bad variable; a process started
 * with bad config exits 1 with that message instead of a stack trace.
 */
import { expect, it } from 'vitest';
import { ConfigError } from '@oncehook/sdk';
import { sourcesFromConfig } from '@oncehook/providers';
import { loadIngestConfig, loadWorkerConfig } from 'oncehook';
import { DEFAULT_ENGINE_SETTINGS, queueSchemaFor } from '@oncehook/core';
import { spawnService } from '@oncehook/harness';

it('applies documented defaults', () => {
  const config = loadWorkerConfig({});
  // The worker's /metrics has no auth: loopback unless told otherwise.
  expect(config).toMatchObject({ WORKER_CONCURRENCY: 8, LEASE_MS: 30_000, MAX_ATTEMPTS: 10, QUEUE_PREFIX: 'oncehook', METRICS_HOST: '127.0.0.1' });
  expect(loadIngestConfig({})).toMatchObject({
    REQUEST_TIMEOUT_MS: 20_000,
    HEADERS_TIMEOUT_MS: 10_000,
    MAX_INFLIGHT_BODY_BYTES: 16 * 1024 * 1024,
    CLAIM_TIMEOUT_MS: 750,
    ADMIN_ORIGINS: [],
  });
  expect(() => loadIngestConfig({ ADMIN_ORIGINS: 'ops.example.com' })).toThrow(/ADMIN_ORIGINS: "ops.example.com" is not an origin/);
  // A body of the largest allowed size must fit the in-flight budget.
  expect(() => loadIngestConfig({ BODY_LIMIT_BYTES: String(32 * 1024 * 1024) })).toThrow(/MAX_INFLIGHT_BODY_BYTES: must be at least BODY_LIMIT_BYTES \(33554432\)/);
});

it("the engine's defaults are the worker's (createEngine without settings runs as a worker without variables)", () => {
  const worker = loadWorkerConfig({});
  expect(DEFAULT_ENGINE_SETTINGS).toEqual({
    leaseMs: worker.LEASE_MS,
    retry: { maxAttempts: worker.MAX_ATTEMPTS, backoffMs: worker.RETRY_BACKOFF_MS },
    unhandled: worker.UNHANDLED_EVENTS,
  });
});

it('parses per-source retention overrides and names a bad one', () => {
  expect(loadWorkerConfig({ RETENTION_OVERRIDES: 'shopify=2, slack=1' }).RETENTION_OVERRIDES).toEqual({ shopify: 2, slack: 1 });
  expect(loadWorkerConfig({}).RETENTION_DAYS).toBe(35);
  expect(() => loadWorkerConfig({ RETENTION_OVERRIDES: 'shopify:2' })).toThrow(/RETENTION_OVERRIDES: "shopify:2" is not name=days/);
});

it("BACKFILL_SCHEDULE: source=every/window (source:kind=... for a source named otherwise), checked against its provider's API; a mistake is named", () => {
  expect(loadWorkerConfig({ BACKFILL_SCHEDULE: 'stripe=15m/72h, stripe-eu:stripe=1h/1d' }).BACKFILL_SCHEDULE).toEqual([
    { source: 'stripe', kind: 'stripe', everyMs: 900_000, windowMs: 259_200_000 },
    { source: 'stripe-eu', kind: 'stripe', everyMs: 3_600_000, windowMs: 86_400_000 },
  ]);
  expect(loadWorkerConfig({}).BACKFILL_SCHEDULE).toEqual([]);
  expect(loadWorkerConfig({}).BACKFILL_MAX_CALLS).toBe(20);
  const refused: [string, RegExp][] = [
    ['stripe', /"stripe" is not source=every\/window/],
    ['shopify=15m/1d', /shopify has no API that lists its events; the providers that have one: stripe, github, paddle/],
    ['acme=15m/1d', /"acme" is not a provider kind \(a source named otherwise than its kind is written source:kind=every\/window\)/],
    ['stripe=15 minutes/1d', /every and window are durations like 90s, 15m, 72h, 30d/],
    ['stripe=2h/1h', /the window \(1h\) must be at least the interval \(2h\)/],
    ['stripe=1h/45d', /Stripe lists the events of the last 30 days; the window 45d is longer/],
    ['github=1h/3d,github=2h/3d', /schedules source "github" twice/],
  ];
  for (const [value, message] of refused) expect(() => loadWorkerConfig({ BACKFILL_SCHEDULE: value }), value).toThrow(message);
});

it('names every invalid variable in one message', () => {
  expect(() => loadWorkerConfig({ LEASE_MS: 'soon', WORKER_CONCURRENCY: '0', DATABASE_URL: 'not a url' })).toThrow(ConfigError);
  try {
    loadWorkerConfig({ LEASE_MS: 'soon', WORKER_CONCURRENCY: '0', DATABASE_URL: 'not a url' });
  } catch (error) {
    const message = (error as Error).message;
    expect(message).toContain('LEASE_MS');
    expect(message).toContain('WORKER_CONCURRENCY');
    expect(message).toContain('DATABASE_URL');
  }
});

it('ingest refuses to start without any webhook source', () => {
  expect(() => sourcesFromConfig(loadIngestConfig({}))).toThrow(/STRIPE_WEBHOOK_SECRET/);
  const sources = sourcesFromConfig(loadIngestConfig({ STRIPE_WEBHOOK_SECRET: 'whsec_old_0123456789abcdef, whsec_new_0123456789abcdef' }));
  expect([...sources.keys()]).toEqual(['stripe']);
});

it('a process with bad config exits 1 with the readable message', async () => {
  const worker = spawnService('worker', { LEASE_MS: 'soon' });
  const { code } = await worker.exited;
  expect(code).toBe(1);
  expect(worker.lines.join('\n')).toMatch(/Invalid configuration; fix these environment variables:\n\s+LEASE_MS:/);
  expect(worker.lines.join('\n')).not.toMatch(/\bat .*\.ts:\d+/); // no stack trace
});

it('refuses a retention shorter than a provider redelivers for, naming the source, the window and the setting', () => {
  const stripe = { STRIPE_WEBHOOK_SECRET: 'whsec_retention_0123456789abcdef' };
  expect(() => sourcesFromConfig(loadIngestConfig({ ...stripe, RETENTION_DAYS: '1' }))).toThrow(
    /RETENTION_DAYS=1 keeps the payloads of source "stripe" for 1 day\(s\), but Stripe retries live-mode deliveries for up to 3 days.*at least 3 days/,
  );
  expect(() => sourcesFromConfig(loadIngestConfig({ ...stripe, RETENTION_OVERRIDES: 'stripe=2' }))).toThrow(/RETENTION_OVERRIDES stripe=2 keeps the payloads of source "stripe"/);
  // At the window, and for a provider with a shorter one, it starts.
  expect(sourcesFromConfig(loadIngestConfig({ ...stripe, RETENTION_DAYS: '3' })).has('stripe')).toBe(true);
  const shopify = { SHOPIFY_WEBHOOK_SECRET: 'shpss_retention_0123456789abcdef', RETENTION_OVERRIDES: 'shopify=1' };
  expect(sourcesFromConfig(loadIngestConfig(shopify)).has('shopify')).toBe(true);
});

it('QUEUE_BACKEND: redis by default, postgres on request, anything else refused by name; the queue schema follows QUEUE_PREFIX', () => {
  expect(loadWorkerConfig({}).QUEUE_BACKEND).toBe('redis');
  expect(loadIngestConfig({ QUEUE_BACKEND: 'postgres' }).QUEUE_BACKEND).toBe('postgres');
  expect(() => loadWorkerConfig({ QUEUE_BACKEND: 'sqs' })).toThrow(/QUEUE_BACKEND: .*"redis"\|"postgres"/);
  // A valid, quoted-free identifier of its own per prefix, never Oncehook's own schema.
  expect(queueSchemaFor('oncehook')).toBe('oncehook_queue');
  expect(queueSchemaFor('{Oncehook}')).toBe('_oncehook__queue');
  expect(queueSchemaFor('test-1a2b')).toBe('test_1a2b_queue');
  expect(queueSchemaFor('9lives')).toBe('_9lives_queue');
  expect(queueSchemaFor('x'.repeat(100))).toHaveLength(63);
});
