/**
 * One trace per event (packages/shared/src/tracing.ts): the delivery's span at the edge, each
 * attempt of the handler's run, its steps and the outbound calls, with the idempotency key as
 * an attribute, all in one trace. An attempt that fails after its external call and the retry
 * that resumes it (skipping the recorded step) are two attempts of the same trace, because the
 * trace context travels on the event row, not only in the job. In process, with the SDK's
 * in-memory exporter; real ingest, worker, sandbox, Postgres and Redis.
 */
import { deliver, paymentSucceeded, signStripe, startSandbox, waitFor, type SandboxHandle } from '@oncehook/harness';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { createOutboundClient, defineHandler } from '@oncehook/sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers/db.js';
import { FAST, q, startIngest, startWorker, T, testPrefix } from './helpers/stack.js';

let db: TestDatabase;
let sandbox: SandboxHandle;
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(async () => {
  provider.register();
  db = await createTestDatabase();
  sandbox = await startSandbox();
});
afterAll(async () => {
  await sandbox.close();
  await db.drop();
  await provider.shutdown();
  trace.disable();
});

it('a delivery, both attempts of its run, the step and the outbound call are one trace; the key is on the spans', { timeout: 30_000 }, async () => {
  const email = createOutboundClient({ name: 'receipts', baseUrl: `${sandbox.url}/email` });
  const handler = defineHandler({ name: 'traced.receipt', source: 'stripe', type: 'payment_intent.succeeded' }, async (event, ctx) => {
    await ctx.step('send-receipt', async ({ idempotencyKey, signal }) => {
      const sent = await email.request<{ id: string }>({
        method: 'POST',
        path: '/emails',
        body: { to: 'buyer@example.com', subject: 'receipt', text: 'thanks' },
        idempotencyKey,
        idempotencyKeyField: 'dedupe_key',
        signal,
      });
      return { id: sent.body.id };
    });
    // The first attempt dies after its external call was recorded; the second resumes.
    if (event.attempt === 1) throw new Error('crashed after the receipt was sent');
    await ctx.transaction('mark-sent', async () => ({ ok: true }), { final: true });
  });

  const prefix = testPrefix();
  const ingest = await startIngest({ databaseUrl: db.url, prefix });
  const worker = await startWorker({ databaseUrl: db.url, prefix, handlers: [handler], env: { ...FAST, RETRY_BACKOFF_MS: '50' } });
  try {
    expect((await deliver(ingest.url, signStripe(paymentSucceeded('evt_traced')))).status).toBe(202);
    await waitFor(async () => (await q.getEventByKey(db.pool, 'stripe', 'evt_traced'))?.state === 'done', { what: 'event done' });
    await waitFor(() => exporter.getFinishedSpans().filter((s) => s.name === 'oncehook.run').length === 2, { what: 'two run spans' });
    const spans = exporter.getFinishedSpans();
    const byName = (name: string) => spans.filter((s) => s.name === name);
    const [receive] = byName('webhook.receive');
    expect(receive?.attributes).toMatchObject({ 'oncehook.source': 'stripe', 'oncehook.event_id': 'evt_traced', 'oncehook.outcome': 'new' });
    const traceId = receive!.spanContext().traceId;

    // The event row carries the delivery's trace for every later lease.
    const { rows } = await db.pool.query<{ trace_parent: string }>(`SELECT trace_parent FROM ${T.events} WHERE event_id = 'evt_traced'`);
    expect(rows[0]?.trace_parent).toContain(traceId);

    const runs = byName('oncehook.run').sort((a, b) => Number(a.attributes['oncehook.attempt']) - Number(b.attributes['oncehook.attempt']));
    expect(runs.map((r) => [r.attributes['oncehook.attempt'], r.attributes['oncehook.outcome']])).toEqual([
      [1, 'retry'],
      [2, 'done'],
    ]);
    const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
    for (const run of runs) {
      expect(run.spanContext().traceId).toBe(traceId);
      expect(parentOf(run)).toBe(receive!.spanContext().spanId);
    }

    // The external step ran once (attempt 1), its outbound try is its child, with the key.
    const steps = byName('oncehook.step');
    const external = steps.filter((s) => s.attributes['oncehook.step.kind'] === 'external');
    expect(external).toHaveLength(1);
    expect(parentOf(external[0]!)).toBe(runs[0]!.spanContext().spanId);
    const key = external[0]!.attributes['oncehook.idempotency_key'];
    expect(typeof key).toBe('string');
    const outbound = byName('outbound receipts');
    expect(outbound).toHaveLength(1);
    expect(outbound[0]!.attributes).toMatchObject({ 'oncehook.idempotency_key': key, 'http.response.status_code': 200 });
    expect(parentOf(outbound[0]!)).toBe(external[0]!.spanContext().spanId);
    // The local step of the resumed attempt is a child of attempt 2.
    const local = steps.filter((s) => s.attributes['oncehook.step.kind'] === 'local');
    expect(local.map((s) => parentOf(s))).toEqual([runs[1]!.spanContext().spanId]);
    for (const span of spans) expect(span.spanContext().traceId).toBe(traceId);
    expect(sandbox.stats().email).toMatchObject({ applied: 1 });
  } finally {
    await worker.close();
    await ingest.queue.obliterate({ force: true });
    await ingest.close();
  }
});

it('is off unless the standard OTEL_* variables ask for traces', async () => {
  const { startTracing, tracingRequested } = await import('@oncehook/shared');
  expect(tracingRequested({})).toBe(false);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
  expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
  expect(await startTracing('oncehook-test', {})).toBeNull();
});
