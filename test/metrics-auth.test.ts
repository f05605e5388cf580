/**
 * Protecting /metrics (issue 10, finding 10): with METRICS_TOKEN set, ingest's /metrics and a
 * worker's metrics server answer 401 without `Authorization: Bearer <token>`; /healthz stays
 * open. The worker's server listens on loopback unless told otherwise.
 */
import { createWorkerMetrics } from '@oncehook/shared';
import { loadWorkerConfig, startMetricsServer } from 'oncehook';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { startIngest, testPrefix } from './helpers/stack.js';

const METRICS_TOKEN = 'metrics-token-0123456789';
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db.drop();
});

it('ingest: /metrics needs the bearer token when METRICS_TOKEN is set; /healthz does not', async () => {
  const ingest = await startIngest({ databaseUrl: db.url, prefix: testPrefix(), env: { METRICS_TOKEN } });
  try {
    expect((await fetch(`${ingest.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${ingest.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);
    const ok = await fetch(`${ingest.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('webhook_events_total');
    expect((await fetch(`${ingest.url}/healthz`)).status).toBe(200);
  } finally {
    await ingest.close();
  }
});

it('worker: the metrics server binds loopback by default and needs the token when one is set', async () => {
  expect(loadWorkerConfig({}).METRICS_HOST).toBe('127.0.0.1');
  const server = await startMetricsServer(createWorkerMetrics({ defaultMetrics: false }).registry, 0, undefined, METRICS_TOKEN);
  try {
    const url = `http://127.0.0.1:${server.port}`;
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
    expect((await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(200);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  } finally {
    await server.close();
  }
});
