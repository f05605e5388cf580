/**
 * One trace across a real crash: ingest and two worker processes export their spans over
 * OTLP/HTTP (the standard variables) to a collector this test runs. Worker A takes the event
 * and is killed with kill -9 inside the handler; worker B resumes it after the lease expires
 * (the reconciler re-enqueues the run from the database, so the trace context can only come
 * from the event row). The delivery, A's attempt and B's attempt are one trace.
 */
import http from 'node:http';
import { deliver, killAllServices, paymentSucceeded, signStripe, spawnService, waitFor } from '@oncehook/harness';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { ingestUrl, ledgerSummary, q, testEnv, testPrefix } from './helpers/stack.js';

interface CollectedSpan {
  name: string;
  traceId: string;
  service: string;
  attributes: Record<string, unknown>;
}

let db: TestDatabase;
const spans: CollectedSpan[] = [];
let collector: http.Server;
let endpoint = '';

/** OTLP/JSON: resourceSpans[].resource.attributes, scopeSpans[].spans[] with hex ids and typed attribute values. */
function collect(body: string): void {
  type Attribute = { key: string; value: Record<string, unknown> };
  const flat = (list: Attribute[] = []) => Object.fromEntries(list.map((a) => [a.key, Object.values(a.value)[0]]));
  const payload = JSON.parse(body) as {
    resourceSpans: { resource?: { attributes?: Attribute[] }; scopeSpans: { spans: { name: string; traceId: string; attributes?: Attribute[] }[] }[] }[];
  };
  for (const rs of payload.resourceSpans) {
    const service = String(flat(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans) for (const span of ss.spans) spans.push({ name: span.name, traceId: span.traceId, service, attributes: flat(span.attributes) });
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  collector = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.url === '/v1/traces') collect(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
});
afterEach(async () => {
  await killAllServices(); // nothing of a failed test keeps running
});
afterAll(async () => {
  await new Promise((resolve) => collector.close(resolve));
  await db.drop();
});

it('kill -9 mid-handler and the resumption by another worker: one trace from the delivery to the second attempt', { timeout: 60_000 }, async () => {
  const prefix = testPrefix();
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_BSP_SCHEDULE_DELAY: '50' };
  const ingest = spawnService('ingest', testEnv({ databaseUrl: db.url, prefix, extra: otel }));
  const url = await ingestUrl(ingest);
  const a = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { ...otel, OTEL_SERVICE_NAME: 'worker-a', ONCEHOOK_FAULTS: 'worker.in-handler:delay=30000' } }));
  try {
    await a.waitFor(/worker ready/);
    expect((await deliver(url, signStripe(paymentSucceeded('evt_trace_crash', { account: 'cus_trace', amount: 5 })))).status).toBe(202);
    await a.waitFor(/oncehook-fault worker.in-handler/);
    // A's attempt marker is exported before the kill (the batch processor flushes every 50 ms).
    await waitFor(() => spans.some((s) => s.name === 'oncehook.attempt' && s.service === 'worker-a'), { what: "worker A's attempt span" });
    await a.kill9();

    const b = spawnService('worker', testEnv({ databaseUrl: db.url, prefix, extra: { ...otel, OTEL_SERVICE_NAME: 'worker-b' } }));
    await waitFor(async () => (await q.getEventByKey(db.pool, 'stripe', 'evt_trace_crash'))?.state === 'done', { what: 'event done', timeoutMs: 20_000 });
    await waitFor(() => spans.some((s) => s.name === 'oncehook.run' && s.service === 'worker-b' && s.attributes['oncehook.outcome'] === 'done'), { what: "worker B's run span" });
    await b.stop();

    const receive = spans.find((s) => s.name === 'webhook.receive' && s.attributes['oncehook.event_id'] === 'evt_trace_crash');
    expect(receive?.service).toBe('oncehook-ingest');
    const attemptA = spans.find((s) => s.name === 'oncehook.attempt' && s.service === 'worker-a');
    const runB = spans.find((s) => s.name === 'oncehook.run' && s.service === 'worker-b');
    expect(attemptA?.attributes['oncehook.attempt']).toBe(1);
    expect(runB?.attributes).toMatchObject({ 'oncehook.attempt': 2, 'oncehook.outcome': 'done' });
    expect(attemptA?.traceId).toBe(receive?.traceId);
    expect(runB?.traceId).toBe(receive?.traceId);
    expect((await ledgerSummary(db.pool)).perEvent.get('evt_trace_crash')).toBe(1);
  } finally {
    await ingest.stop();
  }
});
